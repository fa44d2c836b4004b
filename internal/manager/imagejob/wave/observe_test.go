package wave

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newWorld is a job on the named nodes, all of which exist, at t0 with a
// 5-minute start and 1-hour run timeout.
func newWorld(nodes ...string) Snapshot {
	w := Snapshot{
		Pods: map[string]*corev1.Pod{}, Pending: map[string]bool{}, Missing: map[string]bool{}, Nodes: map[string]bool{},
		Failures: map[string]eraserv1.NodeFailure{}, Creating: map[string]CreateFailure{}, PodsSeen: map[string]Seen{},
		Now: t0, Timeouts: Timeouts{Start: 5 * time.Minute, Run: time.Hour},
	}
	for _, n := range nodes {
		w.Targets = append(w.Targets, nodefilter.Target{Name: n, OS: "linux"})
		w.Nodes[n] = true
	}
	return w
}

func (w Snapshot) with(f func(*Snapshot)) Snapshot { f(&w); return w }

func pod(node string) *builder.PodWrapper {
	return builder.MakePod("p-"+node, node, t0.Add(-time.Minute))
}

func summary(removed int) string {
	s := workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": removed}}
	return string(s.Encode())
}

// tally is the part of an observation the table compares.
type tally struct {
	Started, Active, Succeeded, Failed int
	New                                map[string]string // node -> reason
	TimedOut                           []string
	Removed                            int64
}

func tallyOf(o Observation) tally {
	t := tally{Started: o.Started, Active: o.Active, Succeeded: o.Succeeded, Failed: o.Failed, Removed: o.Results.Removed,
		New: map[string]string{}}
	for n, f := range o.NewFailures {
		t.New[n] = f.Reason
	}
	for _, p := range o.TimedOut {
		t.TimedOut = append(t.TimedOut, p.Spec.NodeName)
	}
	return t
}

func TestObserve(t *testing.T) {
	cases := map[string]struct {
		Snapshot Snapshot
		want     tally
	}{
		"nothing started": {
			Snapshot: newWorld("a", "b"),
			want:     tally{New: map[string]string{}},
		},
		"pods from before a crash extend the cursor, up to a gap": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) {
				w.Pods["a"] = pod("a").Obj()
				w.Pods["c"] = pod("c").Obj()
			}),
			want: tally{Started: 1, Active: 1, New: map[string]string{}},
		},
		"succeeded, failed, running; results summed": {
			Snapshot: newWorld("a", "b", "c").with(func(w *Snapshot) {
				w.Started = 3
				w.Pods["a"] = pod("a").Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, summary(2)).Obj()
				w.Pods["b"] = pod("b").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 1, summary(1)).Obj()
				w.Pods["c"] = pod("c").Running(t0).Obj()
			}),
			want: tally{Started: 3, Active: 1, Succeeded: 1, Failed: 1, Removed: 3, New: map[string]string{"b": eraserv1.ReasonPodFailed}},
		},
		"a recorded failure is counted, not new": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Pods["a"] = pod("a").Phase(corev1.PodFailed).Obj()
				w.Failures["a"] = eraserv1.NodeFailure{Node: "a", Reason: eraserv1.ReasonPodFailed}
			}),
			want: tally{Started: 1, Failed: 1, New: map[string]string{}},
		},
		"start and run timeouts": {
			Snapshot: newWorld("slow", "long").with(func(w *Snapshot) {
				w.Started = 2
				w.Pods["slow"] = builder.MakePod("p", "slow", t0.Add(-6*time.Minute)).Waiting(podspec.RemoverContainer, "ImagePullBackOff").Obj()
				w.Pods["long"] = pod("long").Running(t0.Add(-2 * time.Hour)).Obj()
				w.PodsSeen["slow"], w.PodsSeen["long"] = Seen{Created: t0.Add(-5 * time.Minute)}, Seen{Running: t0.Add(-time.Hour)}
			}),
			want: tally{Started: 2, Failed: 2, New: map[string]string{"slow": eraserv1.ReasonStartTimeout, "long": eraserv1.ReasonRunTimeout},
				TimedOut: []string{"slow", "long"}},
		},
		"no pod: pending, recorded, confirmed missing": {
			Snapshot: newWorld("pending", "recorded", "gone").with(func(w *Snapshot) {
				w.Started = 3
				w.Pending["pending"] = true
				w.Failures["recorded"] = eraserv1.NodeFailure{Node: "recorded", Reason: eraserv1.ReasonCreateFailed}
				w.Missing["gone"] = true
			}),
			want: tally{Started: 3, Active: 1, Failed: 2, New: map[string]string{"gone": eraserv1.ReasonPodMissing}},
		},
		"the node of a running pod was deleted": {
			Snapshot: newWorld("a").with(func(w *Snapshot) {
				w.Started = 1
				w.Pods["a"] = pod("a").Running(t0).Obj()
				delete(w.Nodes, "a")
			}),
			want: tally{Started: 1, Failed: 1, New: map[string]string{"a": eraserv1.ReasonNodeDeleted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tallyOf(Observe(tc.Snapshot))); diff != "" {
				t.Errorf("observe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveOutcomes: how each node ended, for the metrics' count of
// failed runs in a row; a node still running, or gone, is not judged.
func TestObserveOutcomes(t *testing.T) {
	w := newWorld("ok", "quiet", "failed", "running", "recorded", "missing", "deleted").with(func(w *Snapshot) {
		w.Started = 7
		w.Pods["ok"] = pod("ok").Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, summary(2)).Obj()
		w.Pods["quiet"] = pod("quiet").Phase(corev1.PodSucceeded).Obj()
		w.Pods["failed"] = pod("failed").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 1, "").Obj()
		w.Pods["running"] = pod("running").Running(t0).Obj()
		w.Failures["recorded"] = eraserv1.NodeFailure{Node: "recorded", Reason: eraserv1.ReasonCreateFailed}
		w.Missing["missing"] = true
		w.Pods["deleted"] = pod("deleted").Running(t0).Obj()
		delete(w.Nodes, "deleted")
	})
	got := map[string]metrics.Outcome{}
	for node, n := range Observe(w).PerNode {
		got[node] = n.Outcome
	}
	want := map[string]metrics.Outcome{
		"ok": metrics.OutcomeSucceeded, "quiet": metrics.OutcomeSucceeded, "failed": metrics.OutcomeFailed,
		"recorded": metrics.OutcomeFailed, "missing": metrics.OutcomeFailed,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

func TestUnconfirmed(t *testing.T) {
	w := newWorld("shown", "pending", "recorded", "unknown", "not-started").with(func(w *Snapshot) {
		w.Started = 4
		w.Pods["shown"] = pod("shown").Obj()
		w.Pending["pending"] = true
		w.Failures["recorded"] = eraserv1.NodeFailure{Node: "recorded"}
	})
	if diff := cmp.Diff([]string{"unknown"}, Unconfirmed(w)); diff != "" {
		t.Errorf("unconfirmed (-want +got):\n%s", diff)
	}
}

// TestWaveThenObserve: the wave's outcome, judged again by observe.
func TestWaveThenObserve(t *testing.T) {
	refusal := errors.New("refused")
	cases := map[string]struct {
		errs []error
		want tally
	}{
		"all created": {errs: []error{nil, nil, nil},
			want: tally{Started: 4, Active: 3, Failed: 1, New: map[string]string{}}},
		"the cursor stops at the first refusal": {errs: []error{nil, refusal, nil},
			want: tally{Started: 2, Active: 1, Failed: 1, New: map[string]string{}}},
		"refused first": {errs: []error{refusal, nil, nil},
			want: tally{Started: 0, New: map[string]string{}}},
	}
	// Nodes a, c, d get pods; b was deleted.
	w := newWorld("a", "b", "c", "d").with(func(w *Snapshot) { delete(w.Nodes, "b") })
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Observe(w)
			p := plan(w, o)
			if diff := cmp.Diff(tc.want, tallyOf(Observe(Advance(w, p, tc.errs)))); diff != "" {
				t.Errorf("after the wave (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemovalsFailedReason(t *testing.T) {
	msg := `{"component":"remover","counts":{"failed":3,"removed":1},"error":"3 of 4 removals failed; first: sha256:ab: rpc error"}`
	w := newWorld("a").with(func(w *Snapshot) {
		w.Started = 1
		w.Pods["a"] = pod("a").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, workerresult.ExitNodeFailed, msg).Obj()
	})
	o := Observe(w)
	if f := o.NewFailures["a"]; f.Reason != eraserv1.ReasonRemovalsFailed || !strings.Contains(f.Message, "3 of 4 removals failed") {
		t.Errorf("failure %+v", f)
	}
	if o.Results.Failed != 3 || o.Results.Removed != 1 {
		t.Errorf("results %+v", o.Results)
	}
}
