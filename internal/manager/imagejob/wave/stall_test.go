package wave

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// TestStalled: a wait stalls when the node is not Ready (since its
// condition changed, or since first seen when the condition has no time) or
// when another run's worker on it is terminating; the earlier counts. This
// run's own pod, a Ready node and a running worker are no stall.
func TestStalled(t *testing.T) {
	seen := t0.Add(-time.Minute)
	ready := builder.MakeNode("n").Ready(corev1.ConditionTrue, t0.Add(-time.Hour)).Obj()
	type got struct {
		Stalled bool
		Since   time.Time
	}
	cases := map[string]struct {
		node *corev1.Node
		busy []*corev1.Pod
		want got
	}{
		"Ready, a running worker": {node: ready, busy: []*corev1.Pod{pod("n").Job("other").Running(t0).Obj()}},
		"Ready, no worker":        {node: ready},
		"no Ready condition yet":  {node: builder.MakeNode("n").Obj()},
		"gone":                    {node: nil},
		"not Ready since its condition changed": {
			node: builder.MakeNode("n").Ready(corev1.ConditionUnknown, t0.Add(-3*time.Minute)).Obj(),
			want: got{Stalled: true, Since: t0.Add(-3 * time.Minute)},
		},
		"not Ready, the condition without a time": {
			node: builder.MakeNode("n").Ready(corev1.ConditionFalse, time.Time{}).Obj(),
			want: got{Stalled: true, Since: seen},
		},
		"Ready, another run's worker terminating": {
			node: ready, busy: []*corev1.Pod{pod("n").Job("other").Deleting(t0.Add(-2 * time.Minute)).Obj()},
			want: got{Stalled: true, Since: t0.Add(-2 * time.Minute)},
		},
		"this run's own terminating pod is no stall": {
			node: ready, busy: []*corev1.Pod{pod("n").Job("job").Deleting(t0.Add(-2 * time.Minute)).Obj()},
		},
		"both: the earlier counts": {
			node: builder.MakeNode("n").Ready(corev1.ConditionFalse, t0.Add(-time.Minute)).Obj(),
			busy: []*corev1.Pod{pod("n").Job("other").Deleting(t0.Add(-5 * time.Minute)).Obj()},
			want: got{Stalled: true, Since: t0.Add(-5 * time.Minute)},
		},
	}
	ours := func(p *corev1.Pod) bool { return p.Labels[podspec.LabelJob] == "job" }
	gotAll, wantAll := map[string]got{}, map[string]got{}
	for name, tc := range cases {
		s, ok := Stalled(tc.node, tc.busy, ours, seen)
		gotAll[name], wantAll[name] = got{Stalled: ok, Since: s.Since}, tc.want
	}
	if diff := cmp.Diff(wantAll, gotAll); diff != "" {
		t.Errorf("stalled (-want +got):\n%s", diff)
	}
}

// TestPlanGivesUpStalledWaits: a node whose wait stalled waits until the
// bound, with a wake-up at it, then fails WaitTimedOut without a pod; a
// wait that did not stall never times out; a node first reached with a
// wait stalled past the bound is given up at once.
func TestPlanGivesUpStalledWaits(t *testing.T) {
	const bound = 10 * time.Minute
	stalledSince := func(m map[string]time.Time) StallFunc {
		return func(n string) (Stall, bool) {
			since, ok := m[n]
			return Stall{Since: since, Why: "the node has not been Ready"}, ok
		}
	}
	waiting := func(w *Snapshot) {
		w.Started = 1
		w.Waiting = map[string]bool{"a": true}
		w.HeldBy = held(map[string]string{"a": "imagejob-x"})
		w.Timeouts.Wait = bound
	}
	type result struct {
		Queued queued
		Wake   time.Time
	}
	cases := map[string]struct {
		Snapshot Snapshot
		want     result
	}{
		"a wait that did not stall waits on, however long": {
			Snapshot: newWorld("a").with(waiting),
			want:     result{Queued: queued{Started: 1, Waiting: map[string]string{"a": "imagejob-x"}}},
		},
		"a stalled wait within the bound waits, and wakes at the bound": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				waiting(w)
				w.Stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Minute)})
			}),
			want: result{Queued: queued{Started: 1, Waiting: map[string]string{"a": "imagejob-x"}}, Wake: t0.Add(bound - time.Minute)},
		},
		"a stalled wait past the bound is given up": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				waiting(w)
				w.Stall = stalledSince(map[string]time.Time{"a": t0.Add(-bound)})
			}),
			want: result{Queued: queued{Started: 1, Failed: map[string]string{"a": eraserv1.ReasonWaitTimedOut}}},
		},
		"a node first reached, stalled past the bound, is given up at once": {
			Snapshot: newWorld("a", "b").with(func(w *Snapshot) {
				w.HeldBy = held(map[string]string{"a": "imagejob-x"})
				w.Timeouts.Wait = bound
				w.Stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Hour)})
			}),
			want: result{Queued: queued{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": eraserv1.ReasonWaitTimedOut}}},
		},
		"a stalled node no run holds gets its pod": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Timeouts.Wait = bound
				w.Stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Hour)})
			}),
			want: result{Queued: queued{Create: []string{"a"}, Started: 1}},
		},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		p := plan(tc.Snapshot, Observe(tc.Snapshot))
		r := result{Queued: queued{Started: p.Started}, Wake: p.Wake}
		for _, i := range p.Create {
			r.Queued.Create = append(r.Queued.Create, tc.Snapshot.Targets[i].Name)
		}
		if len(p.Waiting) > 0 {
			r.Queued.Waiting = p.Waiting
		}
		if len(p.Failed) > 0 {
			r.Queued.Failed = map[string]string{}
			for n, f := range p.Failed {
				r.Queued.Failed[n] = f.Reason
			}
		}
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
