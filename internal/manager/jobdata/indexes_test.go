package jobdata

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseIndexes: a record edited by hand, or one of a longer node list,
// restores what it can and never indexes past the list.
func TestParseIndexes(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []int
	}{
		"empty":                    {in: ""},
		"ranges and singles":       {in: "0-2,4,6-7", want: []int{0, 1, 2, 4, 6, 7}},
		"past the list: clamped":   {in: "8-1000000000,99", want: []int{8, 9}},
		"malformed parts skipped":  {in: "x,3-1,-2,5-y,1", want: []int{1}},
		"overlaps counted once":    {in: "1-3,2-4", want: []int{1, 2, 3, 4}},
		"negative and huge starts": {in: "-5-2,10000000000", want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ParseIndexes(tc.in, 10)); diff != "" {
				t.Errorf("ParseIndexes(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// FuzzIndexes: whatever a status holds, parsing never indexes past the list,
// and what FormatIndexes writes parses back to itself.
func FuzzIndexes(f *testing.F) {
	for _, s := range []string{"", "0-2,4", "x,3-1,-2", "9-1000000000"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = max(0, min(n, 1000))
		idx := ParseIndexes(s, n)
		for _, i := range idx {
			if i < 0 || i >= n {
				t.Fatalf("ParseIndexes(%q, %d) gave %d", s, n, i)
			}
		}
		if diff := cmp.Diff(idx, ParseIndexes(FormatIndexes(idx), n)); diff != "" {
			t.Fatalf("round trip of %v (-want +got):\n%s", idx, diff)
		}
	})
}
