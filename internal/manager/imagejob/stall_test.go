package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

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
	gotAll, wantAll := map[string]got{}, map[string]got{}
	for name, tc := range cases {
		s, ok := stalled(tc.node, tc.busy, "job", "", seen)
		gotAll[name], wantAll[name] = got{Stalled: ok, Since: s.since}, tc.want
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
	stalledSince := func(m map[string]time.Time) stallFunc {
		return func(n string) (stall, bool) {
			since, ok := m[n]
			return stall{since: since, why: "the node has not been Ready"}, ok
		}
	}
	waiting := func(w *world) {
		w.started = 1
		w.waiting = map[string]bool{"a": true}
		w.holder = held(map[string]string{"a": "imagejob-x"})
		w.timeouts.wait = bound
	}
	type result struct {
		Queued queued
		Wake   time.Time
	}
	cases := map[string]struct {
		world world
		want  result
	}{
		"a wait that did not stall waits on, however long": {
			world: newWorld("a").with(waiting),
			want:  result{Queued: queued{Started: 1, Waiting: map[string]string{"a": "imagejob-x"}}},
		},
		"a stalled wait within the bound waits, and wakes at the bound": {
			world: newWorld("a").with(func(w *world) {
				waiting(w)
				w.stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Minute)})
			}),
			want: result{Queued: queued{Started: 1, Waiting: map[string]string{"a": "imagejob-x"}}, Wake: t0.Add(bound - time.Minute)},
		},
		"a stalled wait past the bound is given up": {
			world: newWorld("a").with(func(w *world) {
				waiting(w)
				w.stall = stalledSince(map[string]time.Time{"a": t0.Add(-bound)})
			}),
			want: result{Queued: queued{Started: 1, Failed: map[string]string{"a": ReasonWaitTimedOut}}},
		},
		"a node first reached, stalled past the bound, is given up at once": {
			world: newWorld("a", "b").with(func(w *world) {
				w.holder = held(map[string]string{"a": "imagejob-x"})
				w.timeouts.wait = bound
				w.stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Hour)})
			}),
			want: result{Queued: queued{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": ReasonWaitTimedOut}}},
		},
		"a stalled node no run holds gets its pod": {
			world: newWorld("a").with(func(w *world) {
				w.timeouts.wait = bound
				w.stall = stalledSince(map[string]time.Time{"a": t0.Add(-time.Hour)})
			}),
			want: result{Queued: queued{Create: []string{"a"}, Started: 1}},
		},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		p := plan(tc.world, observe(tc.world))
		r := result{Queued: queued{Started: p.started}, Wake: p.wake}
		for _, i := range p.create {
			r.Queued.Create = append(r.Queued.Create, tc.world.targets[i].Name)
		}
		if len(p.waiting) > 0 {
			r.Queued.Waiting = p.waiting
		}
		if len(p.failed) > 0 {
			r.Queued.Failed = map[string]string{}
			for n, f := range p.failed {
				r.Queued.Failed[n] = f.Reason
			}
		}
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}
