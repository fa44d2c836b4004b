package imagejob

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestFailedPassFreesItsNodes drives each step of a pass that can fail
// after the wave took its nodes in the queue: the exclusion lists cannot be
// read, the reference index has not synced, the pod cannot be built. Each
// time, another run then creates its pods on the same nodes at its first
// pass: nothing of the failed pass holds them.
func TestFailedPassFreesItsNodes(t *testing.T) {
	const noRefs = "apiVersion: eraser.sh/v1alpha3\nmanager: {retention: {protectReferenced: false}}\n"
	cases := map[string]struct {
		// doc is the failing run's configuration.
		doc string
		// fault breaks the step; it returns what mends it.
		fault func(f *fixture, lists *atomic.Bool) func()
		// fails is whether the run fails (rather than retrying the pass).
		fails bool
	}{
		"the exclusion lists cannot be read": {
			doc: noRefs,
			fault: func(_ *fixture, lists *atomic.Bool) func() {
				lists.Store(true)
				return func() { lists.Store(false) }
			},
		},
		"the reference index has not synced": {
			doc: baseConfig,
			fault: func(f *fixture, _ *atomic.Bool) func() {
				f.refs.mu.Lock()
				f.refs.unsynced = true
				f.refs.mu.Unlock()
				return func() {}
			},
		},
		"the pod cannot be built": {
			doc:   "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'npipe://./pipe/containerd-containerd'}, retention: {protectReferenced: false}}\n",
			fault: func(*fixture, *atomic.Bool) func() { return func() {} },
			fails: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var failLists atomic.Bool
			c := failingLists{Client: f.cached, fail: &failLists}
			f.r = NewReconciler(c, env.Client, f.stores, f.rec, f.clock, nil, Options{Namespace: f.ns, LogLevel: "info", References: &f.refs})
			f.manyNodes(2, "freed")
			f.job("broken", podspec.KindManual, tc.doc, "*")
			mend := tc.fault(f, &failLists)
			for range 2 {
				f.clock.Step(passInterval)
				f.settle()
				_, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "broken"}})
				if tc.fails && err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
			}
			broken := f.get("broken")
			if failed := broken.Status.Phase == eraserv1.PhaseFailed; failed != tc.fails {
				t.Fatalf("the broken run's phase %q, want failed %v", broken.Status.Phase, tc.fails)
			}
			if n := len(f.pods("broken")); n != 0 {
				t.Fatalf("the broken run created %d pods", n)
			}
			mend()
			if tc.fails {
				// A run ranked after every other sees whether the failed
				// one still claims or waits for a node.
				last := nodequeue.Rank{Scheduled: true, Created: f.clock.Now().Add(24 * time.Hour), Name: "last"}
				err := f.r.queue.Take("last", "", last, 0, func(s nodequeue.Offer) nodequeue.Choice {
					for _, node := range []string{"freed-000", "freed-001"} {
						if h := s.HeldBy(node); h != "" {
							t.Errorf("after the failed run, %s is held by %q", node, h)
						}
					}
					return nodequeue.Choice{}
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			f.job("next", podspec.KindManual, noRefs, "*")
			f.reconcile("next")
			f.reconcile("next")
			next := f.get("next")
			if n := len(f.pods("next")); n != 2 || next.Status.Waiting != 0 {
				t.Errorf("the next run has %d pods and %d nodes waiting (behind %q), want pods on both nodes",
					n, next.Status.Waiting, next.Status.QueuedBehind)
			}
		})
	}
}

// failingLists is the manager's client whose ConfigMap lists fail while
// fail is set, as when the API server does not answer.
type failingLists struct {
	client.Client
	fail *atomic.Bool
}

func (c failingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.ConfigMapList); ok && c.fail.Load() {
		return errors.New("injected: the API server is unavailable")
	}
	return c.Client.List(ctx, list, opts...)
}

// trimmedAt is the time the trimmed-pod tests judge at.
var trimmedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func trimmedPod() *builder.PodWrapper {
	return builder.MakePod("p-a", "a", trimmedAt.Add(-time.Minute))
}

// TestTrimmedPodsJudgedAlike: the manager's cache trims pods
// (cacheopts.TrimPod); every pod is judged the same trimmed as whole.
func TestTrimmedPodsJudgedAlike(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"pending":              trimmedPod().Waiting(podspec.RemoverContainer, "ImagePullBackOff").Obj(),
		"old":                  builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Obj(),
		"running":              trimmedPod().Running(trimmedAt.Add(-2 * time.Hour)).Obj(),
		"succeeded":            trimmedPod().Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, string((&workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 3}}).Encode())).Obj(),
		"failed":               trimmedPod().Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 2, string((&workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1}}).Encode())).Obj(),
		"oom in a running pod": trimmedPod().Running(trimmedAt).Terminated(podspec.ScannerContainer, 137, "").Obj(),
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
			to := wave.Timeouts{Start: 5 * time.Minute, Run: time.Hour}
			seen := wave.Seen{Created: trimmedAt.Add(-10 * time.Minute), Running: trimmedAt.Add(-2 * time.Hour)}
			want, got := wave.Classify(p, seen, trimmedAt, to, true), wave.Classify(trimmed.(*corev1.Pod), seen, trimmedAt, to, true)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(wave.Outcome{})); diff != "" {
				t.Errorf("outcome (-whole +trimmed):\n%s", diff)
			}
			if !wave.Deadline(p, seen, to).Equal(wave.Deadline(trimmed.(*corev1.Pod), seen, to)) {
				t.Error("deadlines differ")
			}
		})
	}
}

// TestSightedTrimmed: the cache's trimmed pods (cacheopts.TrimPod) keep
// what a restarted manager's sight is taken from.
func TestSightedTrimmed(t *testing.T) {
	for name, p := range map[string]*corev1.Pod{
		"pending": builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Obj(),
		"running": builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Running(trimmedAt.Add(-time.Minute)).Obj(),
	} {
		p.UID = "u1"
		trimmed, err := cacheopts.TrimPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		sk := wave.Skew{D: time.Minute, OK: true}
		want, got := wave.FirstSeen(wave.Seen{}, p, time.Time{}, sk, trimmedAt), wave.FirstSeen(wave.Seen{}, trimmed.(*corev1.Pod), time.Time{}, sk, trimmedAt)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: sight (-whole +trimmed):\n%s", name, diff)
		}
	}
}

// TestFailureBudgetStopsWaves: with waves of 3 and a budget of 1, the first
// wave is the canary: a first failure starts nothing new while the wave
// runs, a second exceeds the budget, the wave's last pod is let finish, and
// the run ends Failed (FailureBudgetExceeded) without a pod on the seven
// other nodes, which count as skipped.
func TestFailureBudgetStopsWaves(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(10, "b")
	f.job("budget", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 3, maxFailedNodes: 1}}", "*")
	f.reconcile("budget")
	f.reconcile("budget")
	pods := f.pods("budget")
	if len(pods) != 3 {
		t.Fatalf("%d pods in the first wave, want 3", len(pods))
	}
	// One failure is within the budget, but the canary still runs.
	f.finishPod(&pods[0], corev1.PodFailed, nil)
	f.reconcile("budget")
	if n := len(f.pods("budget")); n != 3 {
		t.Fatalf("%d pods while the canary runs, want 3", n)
	}
	// The second exceeds it: the last pod of the wave runs on.
	f.finishPod(&pods[1], corev1.PodFailed, nil)
	f.runPod(&pods[2])
	f.reconcile("budget")
	job := f.get("budget")
	if job.Status.Phase != eraserv1.PhaseRunning || !strings.Contains(readyCondition(job).Message, "failure budget exceeded") {
		t.Fatalf("over the budget with a pod running: phase %s, %+v", job.Status.Phase, readyCondition(job))
	}
	if n := len(f.pods("budget")); n != 3 {
		t.Fatalf("%d pods after the budget was exceeded, want 3", n)
	}
	f.finishPod(&pods[2], corev1.PodSucceeded, removed(1, 1))
	f.reconcile("budget")
	f.reconcile("budget")
	job = f.get("budget")
	type counts struct {
		Phase                                     eraserv1.JobPhase
		Reason                                    string
		Desired, Started, Succeeded, Failed, Skip int
		Pods                                      int
	}
	want := counts{Phase: eraserv1.PhaseFailed, Reason: eraserv1.ReasonFailureBudgetExceeded, Desired: 10, Started: 3, Succeeded: 1, Failed: 2, Skip: 7, Pods: 3}
	got := counts{Phase: job.Status.Phase, Reason: readyCondition(job).Reason, Desired: job.Status.Desired, Started: job.Status.Started,
		Succeeded: job.Status.Succeeded, Failed: job.Status.Failed, Skip: job.Status.Skipped, Pods: len(f.pods("budget"))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the stopped run (-want +got):\n%s", diff)
	}
	msg := readyCondition(job).Message
	for _, s := range []string{"2 of 10 nodes failed", "maxFailedNodes 1 allows (1)", "7 nodes not started"} {
		if !strings.Contains(msg, s) {
			t.Errorf("condition message %q lacks %q", msg, s)
		}
	}
	// The nodes never reached got no pod: only the canary's have one.
	canary := map[string]bool{}
	for _, p := range pods {
		canary[p.Spec.NodeName] = true
	}
	for _, p := range f.pods("budget") {
		if !canary[p.Spec.NodeName] {
			t.Errorf("pod on untouched node %s", p.Spec.NodeName)
		}
	}
	events := f.events()
	if n := strings.Count(events, "Warning "+eraserv1.ReasonFailureBudgetExceeded+" "); n != 1 {
		t.Errorf("%d FailureBudgetExceeded Warnings, want 1; events:\n%s", n, events)
	}
	if !strings.Contains(events, "Warning Failed ") {
		t.Errorf("no Failed Warning; events:\n%s", events)
	}
}

// TestExclusionListAddedMidJob: an exclusion list created while a rolling
// job runs is mounted into the pods of the nodes not reached yet.
func TestExclusionListAddedMidJob(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(2, "ex")
	f.job("excl", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 1}}", "*")
	f.reconcile("excl")
	first := f.pods("excl")
	if len(first) != 1 || mountsList(&first[0], "late-list") {
		t.Fatalf("first wave: %d pods", len(first))
	}
	list := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "late-list", Labels: map[string]string{jobdata.LabelExclusionList: "true"}},
		Data: map[string]string{"list.json": `{"excluded":["docker.io/library/*"]}`}}
	if err := env.Client.Create(f.ctx, list); err != nil {
		t.Fatal(err)
	}
	f.finishPod(&first[0], corev1.PodSucceeded, removed(1, 1))
	f.reconcile("excl")
	for _, p := range f.pods("excl") {
		if p.Name != first[0].Name && !mountsList(&p, "late-list") {
			t.Errorf("pod %s of the second wave does not mount the list created during the job", p.Name)
		}
	}
}

func mountsList(pod *corev1.Pod, cm string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm {
			return true
		}
	}
	return false
}

// TestFailuresAnnouncedOnce: failures beyond the 32 the status names are
// counted every pass but announced once, in one Event per pass, not re-read
// and re-announced.
func TestFailuresAnnouncedOnce(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(40, "fo")
	f.job("once", podspec.KindManual, baseConfig+"manager: {imageJob: {cleanup: {delayOnFailure: 1h}}}", "*")
	f.reconcile("once")
	pods := f.pods("once")
	for i := range pods[:39] {
		f.finishPod(&pods[i], corev1.PodFailed, nil)
	}
	for range 3 {
		f.reconcile("once")
	}
	job := f.get("once")
	if job.Status.Failed != 39 || job.Status.Phase != eraserv1.PhaseRunning || len(job.Status.FailedNodes) != eraserv1.MaxReportedNodes {
		t.Fatalf("status: failed %d, phase %s, %d named", job.Status.Failed, job.Status.Phase, len(job.Status.FailedNodes))
	}
	var events []string
	for len(f.rec.Events) > 0 {
		if e := <-f.rec.Events; strings.Contains(e, " NodeFailed ") {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "39 node(s) failed") || !strings.Contains(events[0], "and 34 more") {
		t.Errorf("NodeFailed Events %q, want one naming the 39 failures", events)
	}
}

// TestLegacyExclusionsWarned: an exclusion list in upstream's legacy forms
// is mounted as any other, and the manager files a Warning Event on it
// naming each entry and how it is read, once per version of the list, and
// counts them in eraser_exclusion_entries_legacy.
func TestLegacyExclusionsWarned(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(2, "lg")
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "upstream-list", Labels: map[string]string{jobdata.LabelExclusionList: "true"}},
		Data: map[string]string{"list.json": `{"Excluded":["nginx:1.*","*/pause:*","docker.io/library/*"],"note":"kept"}`, "README": "not a list"}}
	clean := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "clean-list", Labels: map[string]string{jobdata.LabelExclusionList: "true"}},
		Data: map[string]string{"list.json": `{"excluded":["quay.io/*"]}`}}
	for _, cm := range []*corev1.ConfigMap{legacy, clean} {
		if err := env.Client.Create(f.ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	f.job("legacy", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 1}}", "*")
	f.reconcile("legacy")
	pods := f.pods("legacy")
	if len(pods) != 1 || !mountsList(&pods[0], "upstream-list") {
		t.Fatalf("first wave: %d pods, or the legacy list is not mounted", len(pods))
	}
	f.finishPod(&pods[0], corev1.PodSucceeded, removed(1, 1))
	f.reconcile("legacy")
	var warned []string
	for len(f.rec.Events) > 0 {
		if e := <-f.rec.Events; strings.Contains(e, eraserv1.ReasonLegacyExclusion) {
			warned = append(warned, e)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("want one %s Event over two waves, got %q", eraserv1.ReasonLegacyExclusion, warned)
	}
	for _, want := range []string{`"nginx:1.*"`, `"*/pause:*"`, `"Excluded"`, `"note"`, `key "README"`, "read as a glob"} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("Event %q does not name %s", warned[0], want)
		}
	}
	if diff := cmp.Diff(map[string]float64{"upstream-list": 5, "clean-list": 0}, metrics.ExclusionsLegacy()); diff != "" {
		t.Errorf("eraser_exclusion_entries_legacy (-want +got):\n%s", diff)
	}
}
