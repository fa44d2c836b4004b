package imagejob

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

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
	events := drain(f)
	if n := strings.Count(events, "Warning "+eraserv1.ReasonFailureBudgetExceeded+" "); n != 1 {
		t.Errorf("%d FailureBudgetExceeded Warnings, want 1; events:\n%s", n, events)
	}
	if !strings.Contains(events, "Warning Failed ") {
		t.Errorf("no Failed Warning; events:\n%s", events)
	}
}

// drain reads the recorded Events so far, one per line.
func drain(f *fixture) string {
	var b strings.Builder
	for {
		select {
		case e := <-f.rec.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}
