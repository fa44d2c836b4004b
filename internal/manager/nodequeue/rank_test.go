package nodequeue

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// TestRankBefore: ImageList runs before scheduled ones, then the earlier run.
func TestRankBefore(t *testing.T) {
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

// TestRoom: the pods a pass may create under the bound on pods in flight.
func TestRoom(t *testing.T) {
	type room struct {
		N       int
		Bounded bool
	}
	cases := map[string]struct {
		bound, inFlight int
		want            room
	}{
		"no bound":          {bound: 0, inFlight: 50, want: room{}},
		"room left":         {bound: 10, inFlight: 4, want: room{N: 6, Bounded: true}},
		"full":              {bound: 4, inFlight: 4, want: room{Bounded: true}},
		"over (bound down)": {bound: 2, inFlight: 5, want: room{Bounded: true}},
	}
	got, want := map[string]room{}, map[string]room{}
	for name, tc := range cases {
		n, b := Headroom(tc.bound, tc.inFlight)
		got[name], want[name] = room{N: n, Bounded: b}, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Headroom (-want +got):\n%s", diff)
	}
}
