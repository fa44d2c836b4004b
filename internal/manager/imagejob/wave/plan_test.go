package wave

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
)

// planned is the part of a wave the table compares.
type planned struct {
	Create  []string
	Started int
	Failed  map[string]string // node -> reason
	Wake    time.Time
}

func TestPlan(t *testing.T) {
	cases := map[string]struct {
		Snapshot Snapshot
		want     planned
	}{
		"no limit: every node": {
			Snapshot: newWorld("a", "b", "c"),
			want:     planned{Create: []string{"a", "b", "c"}, Started: 3},
		},
		"limit counts live pods": {
			Snapshot: newWorld("a", "b", "c", "d").with(func(w *Snapshot) {
				w.Limit = 2
				w.Started = 1
				w.Pods["a"] = pod("a").Running(t0).Obj()
			}),
			want: planned{Create: []string{"b"}, Started: 2},
		},
		"a deleted node fails without a pod": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) { delete(w.Nodes, "a") }),
			want:     planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": eraserv1.ReasonNodeDeleted}},
		},
		"a refused node waits out its backoff, and the wave with it": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Creating["a"] = CreateFailure{First: t0.Add(-time.Second), Next: t0.Add(time.Second), Attempts: 1}
			}),
			want: planned{Started: 0, Wake: t0.Add(time.Second)},
		},
		"a refused node is retried after its backoff": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Creating["a"] = CreateFailure{First: t0.Add(-time.Minute), Next: t0, Attempts: 3}
			}),
			want: planned{Create: []string{"a"}, Started: 1},
		},
		"a refused node fails at the start timeout": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Creating["a"] = CreateFailure{First: t0.Add(-5 * time.Minute), Next: t0.Add(time.Second), Attempts: 9, Message: "forbidden"}
			}),
			want: planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": eraserv1.ReasonCreateFailed}},
		},
		"a node whose pods its kubelet refused, waiting, is recreated after its backoff": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Creating["a"] = Unadmitted(CreateFailure{}, false, t0.Add(-time.Second), "OutOfcpu")
			}),
			want: planned{Create: []string{"a"}, Started: 1},
		},
		"a node whose pods its kubelet refused fails NotAdmitted at the start timeout": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Creating["a"] = Unadmitted(CreateFailure{First: t0.Add(-5 * time.Minute), Attempts: 8}, true, t0.Add(-time.Second), "OutOfcpu")
			}),
			want: planned{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonNotAdmitted}},
		},
		"a refusal by the API server after the kubelet's fails CreateFailed": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Creating["a"] = Refused(Unadmitted(CreateFailure{}, false, t0.Add(-5*time.Minute), "OutOfcpu"), true, t0.Add(-time.Second), "forbidden")
			}),
			want: planned{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonCreateFailed}},
		},
		"without a start timeout, refusals still end": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Timeouts.Start = 0
				w.Creating["a"] = CreateFailure{First: t0.Add(-CreateBound), Next: t0, Attempts: 20}
			}),
			want: planned{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonCreateFailed}},
		},
		"a node whose pod exists past the cursor is not sent again": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Creating["a"] = CreateFailure{First: t0.Add(-5 * time.Minute), Next: t0.Add(time.Second)}
				w.Pods["b"] = pod("b").Phase(corev1.PodSucceeded).Obj()
			}),
			want: planned{Started: 2, Failed: map[string]string{"a": eraserv1.ReasonCreateFailed}},
		},
		"a recorded failure past the cursor is passed": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Failures["a"] = eraserv1.NodeFailure{Node: "a", Reason: eraserv1.ReasonNodeDeleted}
			}),
			want: planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": eraserv1.ReasonNodeDeleted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan(tc.Snapshot, Observe(tc.Snapshot))
			got := planned{Started: p.Started, Wake: p.Wake}
			for _, i := range p.Create {
				got.Create = append(got.Create, tc.Snapshot.Targets[i].Name)
			}
			if len(p.Failed) > 0 {
				got.Failed = map[string]string{}
				for n, f := range p.Failed {
					got.Failed[n] = f.Reason
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusedBackoff(t *testing.T) {
	var f CreateFailure
	var had bool
	var Waits []time.Duration
	for range 8 {
		f = Refused(f, had, t0, "no")
		had = true
		Waits = append(Waits, f.Next.Sub(t0))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, Waits); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
	if f.First != t0 || f.Attempts != 8 {
		t.Errorf("first %v attempts %d", f.First, f.Attempts)
	}
}

// queued is the part of a wave the queue decides.
type queued struct {
	Create  []string
	Started int
	Waiting map[string]string
	Failed  map[string]string
	AtBound bool
}

func held(m map[string]string) nodequeue.HeldByFunc { return func(n string) string { return m[n] } }

// TestPlanQueued: a node another run holds is passed and waits, a node that
// waited is taken first once free, and the bound on pods in flight stops a
// wave short without passing anyone.
func TestPlanQueued(t *testing.T) {
	cases := map[string]struct {
		Snapshot Snapshot
		want     queued
	}{
		"a held node is passed, the others go on": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) { w.HeldBy = held(map[string]string{"b": "imagejob-scheduled-1"}) }),
			want:     queued{Create: []string{"a", "c"}, Started: 3, Waiting: map[string]string{"b": "imagejob-scheduled-1"}},
		},
		"every node held: the run is reached and waits": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) { w.HeldBy = held(map[string]string{"a": "x", "b": "y"}) }),
			want:     queued{Started: 2, Waiting: map[string]string{"a": "x", "b": "y"}},
		},
		"a node that waited is taken once free, before the cursor's": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) {
				w.Limit, w.Started = 1, 2
				w.Waiting = map[string]bool{"a": true}
				w.Pods["b"] = pod("b").Phase(corev1.PodSucceeded).Obj()
			}),
			want: queued{Create: []string{"a"}, Started: 2},
		},
		"a node still held waits on": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.HeldBy = held(map[string]string{"a": "x"})
			}),
			want: queued{Create: []string{"b"}, Started: 2, Waiting: map[string]string{"a": "x"}},
		},
		"a waiting node whose pod appeared waits no more": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Pods["a"] = pod("a").Running(t0).Obj()
			}),
			want: queued{Started: 1},
		},
		"a waiting node that was deleted fails": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				delete(w.Nodes, "a")
			}),
			want: queued{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonNodeDeleted}},
		},
		"the bound stops the wave without passing nodes": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) { w.Headroom, w.Bounded = 1, true }),
			want:     queued{Create: []string{"a"}, Started: 1, AtBound: true},
		},
		"no room: waiting nodes wait, the cursor stays": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Headroom, w.Bounded = 0, true
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}, AtBound: true},
		},
		"over the budget a waiting node is never started": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.Started = 2
				w.Waiting = map[string]bool{"a": true}
				w.Halted = true
			}),
			want: queued{Started: 2, Waiting: map[string]string{"a": ""}},
		},
		"paused: nothing is created, the cursor stays, waiting nodes wait": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Paused = true
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}},
		},
		"paused: a node waiting behind a stalled holder is not given up": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.HeldBy = held(map[string]string{"a": "x"})
				w.Stall = func(string) (Stall, bool) { return Stall{Since: t0.Add(-time.Hour)}, true }
				w.Paused = true
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}},
		},
		"paused: a deleted node still fails": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				delete(w.Nodes, "a")
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Paused = true
			}),
			want: queued{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonNodeDeleted}},
		},
		"a waiting node in creation backoff waits it out": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Waiting = map[string]bool{"a": true}
				w.Creating["a"] = CreateFailure{First: t0.Add(-time.Second), Next: t0.Add(time.Second), Attempts: 1}
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}},
		},
	}
	got, want := map[string]queued{}, map[string]queued{}
	for name, tc := range cases {
		p := plan(tc.Snapshot, Observe(tc.Snapshot))
		q := queued{Started: p.Started, AtBound: p.AtBound}
		for _, i := range p.Create {
			q.Create = append(q.Create, tc.Snapshot.Targets[i].Name)
		}
		if len(p.Waiting) > 0 {
			q.Waiting = p.Waiting
		}
		if len(p.Failed) > 0 {
			q.Failed = map[string]string{}
			for n, f := range p.Failed {
				q.Failed[n] = f.Reason
			}
		}
		got[name], want[name] = q, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestWaitingThenAdvance: a node that waited and whose creation fails waits
// on, rather than rewinding the cursor over the nodes reached after it.
func TestWaitingThenAdvance(t *testing.T) {
	w := newWorld("a", "b", "c").with(func(w *Snapshot) {
		w.Started = 2
		w.Waiting = map[string]bool{"a": true}
		w.Pods["b"] = pod("b").Running(t0).Obj()
	})
	o := Observe(w)
	p := plan(w, o)
	errs := make([]error, len(p.Create))
	errs[0] = errTest // a, the waiting node
	next := Advance(w, p, errs)
	got := struct {
		Started int
		Waiting map[string]bool
		Pending map[string]bool
		Tally   int
	}{next.Started, next.Waiting, next.Pending, Observe(next).Waiting}
	want := struct {
		Started int
		Waiting map[string]bool
		Pending map[string]bool
		Tally   int
	}{3, map[string]bool{"a": true}, map[string]bool{"c": true}, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the wave (-want +got):\n%s", diff)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("refused")
