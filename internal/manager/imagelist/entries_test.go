package imagelist

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// TestBoundEntries: entries over the length any reference can have are
// left out and counted; the others stay, in order, and the list given is
// not changed.
func TestBoundEntries(t *testing.T) {
	atBound := strings.Repeat("a", imageref.MaxLength)
	over := strings.Repeat("b", imageref.MaxLength+1)
	huge := strings.Repeat("c", 1_000_000)
	type result struct {
		Kept             []string
		Dropped, Longest int
	}
	cases := map[string]struct {
		in   []string
		want result
	}{
		"none dropped":       {in: []string{"nginx", "*", atBound}, want: result{Kept: []string{"nginx", "*", atBound}}},
		"one over the bound": {in: []string{"nginx", over, "redis"}, want: result{Kept: []string{"nginx", "redis"}, Dropped: 1, Longest: len(over)}},
		"the first":          {in: []string{huge, "nginx"}, want: result{Kept: []string{"nginx"}, Dropped: 1, Longest: len(huge)}},
		"all":                {in: []string{over, huge}, want: result{Kept: []string{}, Dropped: 2, Longest: len(huge)}},
		"empty":              {want: result{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := append([]string(nil), tc.in...)
			kept, dropped, longest := boundEntries(in)
			if diff := cmp.Diff(tc.want, result{kept, dropped, longest}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.in, in); diff != "" {
				t.Errorf("the list given changed (-want +got):\n%s", diff)
			}
		})
	}
}
