package imagejob

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// newWorld is a job on the named nodes, all of which exist, at t0 with a
// 5-minute start and 1-hour run timeout.
func newWorld(nodes ...string) world {
	w := world{
		pods: map[string]*corev1.Pod{}, pending: map[string]bool{}, missing: map[string]bool{}, nodes: map[string]bool{},
		failures: map[string]eraserv1.NodeFailure{}, creating: map[string]createFailure{}, sights: map[string]sight{},
		now: t0, timeouts: timeouts{start: 5 * time.Minute, run: time.Hour},
	}
	for _, n := range nodes {
		w.targets = append(w.targets, nodefilter.Target{Name: n, OS: "linux"})
		w.nodes[n] = true
	}
	return w
}

func (w world) with(f func(*world)) world { f(&w); return w }

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

func tallyOf(o observation) tally {
	t := tally{Started: o.started, Active: o.active, Succeeded: o.succeeded, Failed: o.failed, Removed: o.results.Removed,
		New: map[string]string{}}
	for n, f := range o.newFailures {
		t.New[n] = f.Reason
	}
	for _, p := range o.timedOut {
		t.TimedOut = append(t.TimedOut, p.Spec.NodeName)
	}
	return t
}

func TestObserve(t *testing.T) {
	cases := map[string]struct {
		world world
		want  tally
	}{
		"nothing started": {
			world: newWorld("a", "b"),
			want:  tally{New: map[string]string{}},
		},
		"pods from before a crash extend the cursor, up to a gap": {
			world: newWorld("a", "b", "c").with(func(w *world) {
				w.pods["a"] = pod("a").Obj()
				w.pods["c"] = pod("c").Obj()
			}),
			want: tally{Started: 1, Active: 1, New: map[string]string{}},
		},
		"succeeded, failed, running; results summed": {
			world: newWorld("a", "b", "c").with(func(w *world) {
				w.started = 3
				w.pods["a"] = pod("a").Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, summary(2)).Obj()
				w.pods["b"] = pod("b").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 1, summary(1)).Obj()
				w.pods["c"] = pod("c").Running(t0).Obj()
			}),
			want: tally{Started: 3, Active: 1, Succeeded: 1, Failed: 1, Removed: 3, New: map[string]string{"b": ReasonPodFailed}},
		},
		"a recorded failure is counted, not new": {
			world: newWorld("a").with(func(w *world) {
				w.started = 1
				w.pods["a"] = pod("a").Phase(corev1.PodFailed).Obj()
				w.failures["a"] = eraserv1.NodeFailure{Node: "a", Reason: ReasonPodFailed}
			}),
			want: tally{Started: 1, Failed: 1, New: map[string]string{}},
		},
		"start and run timeouts": {
			world: newWorld("slow", "long").with(func(w *world) {
				w.started = 2
				w.pods["slow"] = builder.MakePod("p", "slow", t0.Add(-6*time.Minute)).Waiting(podspec.RemoverContainer, "ImagePullBackOff").Obj()
				w.pods["long"] = pod("long").Running(t0.Add(-2 * time.Hour)).Obj()
				w.sights["slow"], w.sights["long"] = sight{created: t0.Add(-5 * time.Minute)}, sight{running: t0.Add(-time.Hour)}
			}),
			want: tally{Started: 2, Failed: 2, New: map[string]string{"slow": ReasonStartTimeout, "long": ReasonRunTimeout},
				TimedOut: []string{"slow", "long"}},
		},
		"no pod: pending, recorded, confirmed missing": {
			world: newWorld("pending", "recorded", "gone").with(func(w *world) {
				w.started = 3
				w.pending["pending"] = true
				w.failures["recorded"] = eraserv1.NodeFailure{Node: "recorded", Reason: ReasonCreateFailed}
				w.missing["gone"] = true
			}),
			want: tally{Started: 3, Active: 1, Failed: 2, New: map[string]string{"gone": ReasonPodMissing}},
		},
		"the node of a running pod was deleted": {
			world: newWorld("a").with(func(w *world) {
				w.started = 1
				w.pods["a"] = pod("a").Running(t0).Obj()
				delete(w.nodes, "a")
			}),
			want: tally{Started: 1, Failed: 1, New: map[string]string{"a": ReasonNodeDeleted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tallyOf(observe(tc.world))); diff != "" {
				t.Errorf("observe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestObserveOutcomes: how each node ended, for the metrics' count of
// failed runs in a row; a node still running, or gone, is not judged.
func TestObserveOutcomes(t *testing.T) {
	w := newWorld("ok", "quiet", "failed", "running", "recorded", "missing", "deleted").with(func(w *world) {
		w.started = 7
		w.pods["ok"] = pod("ok").Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, summary(2)).Obj()
		w.pods["quiet"] = pod("quiet").Phase(corev1.PodSucceeded).Obj()
		w.pods["failed"] = pod("failed").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 1, "").Obj()
		w.pods["running"] = pod("running").Running(t0).Obj()
		w.failures["recorded"] = eraserv1.NodeFailure{Node: "recorded", Reason: ReasonCreateFailed}
		w.missing["missing"] = true
		w.pods["deleted"] = pod("deleted").Running(t0).Obj()
		delete(w.nodes, "deleted")
	})
	got := map[string]metrics.Outcome{}
	for node, n := range observe(w).perNode {
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
	w := newWorld("shown", "pending", "recorded", "unknown", "not-started").with(func(w *world) {
		w.started = 4
		w.pods["shown"] = pod("shown").Obj()
		w.pending["pending"] = true
		w.failures["recorded"] = eraserv1.NodeFailure{Node: "recorded"}
	})
	if diff := cmp.Diff([]string{"unknown"}, unconfirmed(w)); diff != "" {
		t.Errorf("unconfirmed (-want +got):\n%s", diff)
	}
}

// planned is the part of a wave the table compares.
type planned struct {
	Create  []string
	Started int
	Failed  map[string]string // node -> reason
	Wake    time.Time
}

func TestPlan(t *testing.T) {
	cases := map[string]struct {
		world world
		want  planned
	}{
		"no limit: every node": {
			world: newWorld("a", "b", "c"),
			want:  planned{Create: []string{"a", "b", "c"}, Started: 3},
		},
		"limit counts live pods": {
			world: newWorld("a", "b", "c", "d").with(func(w *world) {
				w.limit = 2
				w.started = 1
				w.pods["a"] = pod("a").Running(t0).Obj()
			}),
			want: planned{Create: []string{"b"}, Started: 2},
		},
		"a deleted node fails without a pod": {
			world: newWorld("a", "b").with(func(w *world) { delete(w.nodes, "a") }),
			want:  planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": ReasonNodeDeleted}},
		},
		"a refused node waits out its backoff, and the wave with it": {
			world: newWorld("a", "b").with(func(w *world) {
				w.creating["a"] = createFailure{first: t0.Add(-time.Second), next: t0.Add(time.Second), attempts: 1}
			}),
			want: planned{Started: 0, Wake: t0.Add(time.Second)},
		},
		"a refused node is retried after its backoff": {
			world: newWorld("a").with(func(w *world) {
				w.creating["a"] = createFailure{first: t0.Add(-time.Minute), next: t0, attempts: 3}
			}),
			want: planned{Create: []string{"a"}, Started: 1},
		},
		"a refused node fails at the start timeout": {
			world: newWorld("a", "b").with(func(w *world) {
				w.creating["a"] = createFailure{first: t0.Add(-5 * time.Minute), next: t0.Add(time.Second), attempts: 9, message: "forbidden"}
			}),
			want: planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": ReasonCreateFailed}},
		},
		"without a start timeout, refusals still end": {
			world: newWorld("a").with(func(w *world) {
				w.timeouts.start = 0
				w.creating["a"] = createFailure{first: t0.Add(-createBound), next: t0, attempts: 20}
			}),
			want: planned{Started: 1, Failed: map[string]string{"a": ReasonCreateFailed}},
		},
		"a node whose pod exists past the cursor is not sent again": {
			world: newWorld("a", "b").with(func(w *world) {
				w.creating["a"] = createFailure{first: t0.Add(-5 * time.Minute), next: t0.Add(time.Second)}
				w.pods["b"] = pod("b").Phase(corev1.PodSucceeded).Obj()
			}),
			want: planned{Started: 2, Failed: map[string]string{"a": ReasonCreateFailed}},
		},
		"a recorded failure past the cursor is passed": {
			world: newWorld("a", "b").with(func(w *world) {
				w.failures["a"] = eraserv1.NodeFailure{Node: "a", Reason: ReasonNodeDeleted}
			}),
			want: planned{Create: []string{"b"}, Started: 2, Failed: map[string]string{"a": ReasonNodeDeleted}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := plan(tc.world, observe(tc.world))
			got := planned{Started: p.started, Wake: p.wake}
			for _, i := range p.create {
				got.Create = append(got.Create, tc.world.targets[i].Name)
			}
			if len(p.failed) > 0 {
				got.Failed = map[string]string{}
				for n, f := range p.failed {
					got.Failed[n] = f.Reason
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
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
	w := newWorld("a", "b", "c", "d").with(func(w *world) { delete(w.nodes, "b") })
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := observe(w)
			p := plan(w, o)
			if diff := cmp.Diff(tc.want, tallyOf(observe(advance(w, p, tc.errs)))); diff != "" {
				t.Errorf("after the wave (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefusedAll(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	forbidden := apierrors.NewForbidden(gr, "p", errors.New(`violates PodSecurity "baseline:latest": hostPath volumes`))
	cases := map[string]struct {
		errs []error
		want bool
	}{
		"none sent":               {errs: nil},
		"all forbidden":           {errs: []error{forbidden, forbidden}, want: true},
		"one created":             {errs: []error{forbidden, nil}},
		"a transient error":       {errs: []error{forbidden, apierrors.NewServiceUnavailable("busy")}},
		"invalid (PriorityClass)": {errs: []error{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, got := refusedAll(tc.errs); got != tc.want {
				t.Errorf("refusedAll = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRefusedBackoff(t *testing.T) {
	var f createFailure
	var had bool
	var waits []time.Duration
	for range 8 {
		f = refused(f, had, t0, "no")
		had = true
		waits = append(waits, f.next.Sub(t0))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
	if f.first != t0 || f.attempts != 8 {
		t.Errorf("first %v attempts %d", f.first, f.attempts)
	}
}

func TestRemovalsFailedReason(t *testing.T) {
	if exitRemovalsFailed != worker.ExitNodeFailed {
		t.Fatalf("the manager reads exit code %d as failed removals, the remover exits %d", exitRemovalsFailed, worker.ExitNodeFailed)
	}
	msg := `{"component":"remover","counts":{"failed":3,"removed":1},"error":"3 of 4 removals failed; first: sha256:ab: rpc error"}`
	w := newWorld("a").with(func(w *world) {
		w.started = 1
		w.pods["a"] = pod("a").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 2, msg).Obj()
	})
	o := observe(w)
	if f := o.newFailures["a"]; f.Reason != ReasonRemovalsFailed || !strings.Contains(f.Message, "3 of 4 removals failed") {
		t.Errorf("failure %+v", f)
	}
	if o.results.Failed != 3 || o.results.Removed != 1 {
		t.Errorf("results %+v", o.results)
	}
}

// TestTrimmedPodsJudgedAlike: the manager's cache trims pods
// (cacheopts.TrimPod); every pod is judged the same trimmed as whole.
func TestTrimmedPodsJudgedAlike(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"pending":              pod("a").Waiting(podspec.RemoverContainer, "ImagePullBackOff").Obj(),
		"old":                  builder.MakePod("p", "a", t0.Add(-time.Hour)).Obj(),
		"running":              pod("a").Running(t0.Add(-2 * time.Hour)).Obj(),
		"succeeded":            pod("a").Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, summary(3)).Obj(),
		"failed":               pod("a").Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 2, summary(1)).Obj(),
		"oom in a running pod": pod("a").Running(t0).Terminated(podspec.ScannerContainer, 137, "").Obj(),
	}
	for name, p := range pods {
		t.Run(name, func(t *testing.T) {
			p.Spec.Containers = []corev1.Container{{Name: podspec.RemoverContainer, Image: "remover"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			p.Annotations = map[string]string{"x": "y"}
			trimmed, err := cacheopts.TrimPod(p.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			to := timeouts{start: 5 * time.Minute, run: time.Hour}
			seen := sight{created: t0.Add(-10 * time.Minute), running: t0.Add(-2 * time.Hour)}
			want, got := classify(p, seen, t0, to, true), classify(trimmed.(*corev1.Pod), seen, t0, to, true)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("outcome (-whole +trimmed):\n%s", diff)
			}
			if !deadline(p, seen, to).Equal(deadline(trimmed.(*corev1.Pod), seen, to)) {
				t.Error("deadlines differ")
			}
		})
	}
}

// TestAPIMessageOmitsThePod: one refusal of many pods reads as one.
func TestAPIMessageOmitsThePod(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	a := apiMessage(apierrors.NewForbidden(gr, "job-node-a-12345678", errors.New("exceeded quota: q")))
	b := apiMessage(apierrors.NewForbidden(gr, "job-node-b-87654321", errors.New("exceeded quota: q")))
	if a != b || strings.Contains(a, "node-a") || !strings.Contains(a, "exceeded quota") {
		t.Errorf("messages %q and %q", a, b)
	}
}
