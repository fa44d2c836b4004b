package wave

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunRank: ImageList runs before scheduled ones, then the earlier run.
func TestRunRank(t *testing.T) {
	list := func(name string, at time.Duration) Rank { return Rank{Created: t0.Add(at), Name: name} }
	sched := func(name string, at time.Duration) Rank {
		return Rank{Scheduled: true, Created: t0.Add(at), Name: name}
	}
	cases := map[string]struct {
		a, b Rank
		want bool
	}{
		"a list before an earlier schedule": {a: list("l", time.Hour), b: sched("s", 0), want: true},
		"a schedule after a later list":     {a: sched("s", 0), b: list("l", time.Hour), want: false},
		"the earlier list first":            {a: list("l1", 0), b: list("l2", time.Second), want: true},
		"the later list after":              {a: list("l2", time.Second), b: list("l1", 0), want: false},
		"same time: by name":                {a: list("a", 0), b: list("b", 0), want: true},
		"not before itself":                 {a: list("a", 0), b: list("a", 0), want: false},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = tc.a.Before(tc.b), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("before (-want +got):\n%s", diff)
	}
}
