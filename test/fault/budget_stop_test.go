package fault_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// The failure-budget scenarios: manager.imageJob.maxFailedNodes
// stops a run that fails on too many nodes, and with waves the first wave
// is the canary.

// budgetConfig: waves of 2, a budget of one failed node, finished jobs
// kept an hour.
const budgetConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {imageJob: {maxConcurrentNodes: 2, maxFailedNodes: 1, podStartTimeout: 10m, cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n"

// budgetSettle is how long a stopped run must create nothing more: a pass
// that went on creating pods does so within a second or two.
const budgetSettle = 10 * time.Second

// TestFailureBudgetStopsTheCanary: 8 nodes, waves of 2, maxFailedNodes 1.
// The canary's first pod fails: within the budget, but nothing beyond the
// canary starts while its other pod runs. That one fails too: over the
// budget, the run ends Failed (FailureBudgetExceeded) with pods on the two
// canary nodes only, the 6 others counted skipped, and the ImageList says
// FailureBudgetExceeded.
func TestFailureBudgetStopsTheCanary(t *testing.T) {
	s := newScenario(t, "fault-budget", nil)
	const nodes = 8
	s.addNodes(s.ns, nodes)
	created := podCreates(t, "201")
	s.startManager(budgetConfig)
	s.createList()

	canary := s.waitWave(2)
	s.failWorker(&canary[0], 1)
	s.settle("one canary node failed", 2)
	if job := s.waitJob(time.Minute, "the job", nil, func(*eraserv1.ImageJob) bool { return true }); finished(job) {
		t.Fatalf("job %s after one failure within the budget", job.Status.Phase)
	}
	s.failWorker(&canary[1], workerresult.ExitNodeFailed)

	job := s.waitJob(2*time.Minute, "the job to stop", nil, finished)
	s.settle("the run stopped", 2)
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	s.checkStopped(job, budgetCounts{started: 2, failed: 2, skipped: nodes - 2})
	for _, part := range []string{"2 of 8 nodes failed", "maxFailedNodes 1 allows (1)", "6 nodes not started (counted as skipped)"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("Ready message %q lacks %q", c.Message, part)
		}
	}
	reasons := map[string]string{}
	for _, f := range job.Status.FailedNodes {
		reasons[f.Node] = f.Reason
	}
	want := map[string]string{canary[0].Spec.NodeName: eraserv1.ReasonPodFailed, canary[1].Spec.NodeName: eraserv1.ReasonRemovalsFailed}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("failed nodes %v, want %v", reasons, want)
	}
	if n := podCreates(t, "201") - created; n != 2 {
		t.Errorf("%d pods created, want the canary's 2", n)
	}
}

// TestFailureBudgetAfterTheCanary: the canary ends within the budget (one
// failed, one succeeded), so the waves roll on; a failure in the second
// wave exceeds the budget while that wave's other pod runs. No pod is
// created after it, the running pod is let finish, and the run ends Failed
// (FailureBudgetExceeded) with 4 nodes never started.
func TestFailureBudgetAfterTheCanary(t *testing.T) {
	s := newScenario(t, "fault-budget2", nil)
	const nodes = 8
	s.addNodes(s.ns, nodes)
	s.startManager(budgetConfig)
	s.createList()

	canary := s.waitWave(2)
	s.failWorker(&canary[0], 1)
	s.kubeletPods(func(p *corev1.Pod) bool { return p.Name == canary[1].Name })
	second := s.waitWave(4)
	second = slices.DeleteFunc(second, func(p corev1.Pod) bool {
		return p.Spec.NodeName == canary[0].Spec.NodeName || p.Spec.NodeName == canary[1].Spec.NodeName
	})
	if len(second) != 2 {
		t.Fatalf("second wave %v, want 2 pods", describePods(second))
	}
	s.failWorker(&second[0], 1)
	testenv.WaitFor(t, time.Minute, "the job to say it drains", func() bool {
		j := s.waitJob(time.Minute, "the job", nil, func(*eraserv1.ImageJob) bool { return true })
		return strings.Contains(ready(j.Status.Conditions).Message, "failure budget exceeded")
	})
	s.settle("over the budget, one pod running", 4)
	job := s.waitJob(time.Minute, "the job", nil, func(*eraserv1.ImageJob) bool { return true })
	t.Logf("draining: %s: %s", job.Status.Phase, ready(job.Status.Conditions).Message)
	if finished(job) {
		t.Errorf("job %s while its last pod runs, want it let finish", job.Status.Phase)
	}
	s.kubeletPods(func(p *corev1.Pod) bool { return p.Name == second[1].Name })

	job = s.waitJob(2*time.Minute, "the job to stop", nil, finished)
	s.settle("the run stopped", 4)
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	s.checkStopped(job, budgetCounts{started: 4, succeeded: 2, failed: 2, skipped: nodes - 4})
	for _, part := range []string{"2 of 8 nodes failed", "4 nodes not started (counted as skipped)"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("Ready message %q lacks %q", c.Message, part)
		}
	}
}

type budgetCounts struct{ started, succeeded, failed, skipped int }

// checkStopped checks a run stopped by its budget: the job's counts and
// reason, its Warning, and the ImageList's record of it.
func (s *scenario) checkStopped(job *eraserv1.ImageJob, want budgetCounts) {
	t := s.t
	t.Helper()
	got := budgetCounts{job.Status.Started, job.Status.Succeeded, job.Status.Failed, job.Status.Skipped}
	if c := ready(job.Status.Conditions); job.Status.Phase != eraserv1.PhaseFailed || c.Reason != eraserv1.ReasonFailureBudgetExceeded ||
		got != want || job.Status.Desired != len(s.nodes) {
		t.Errorf("job %s (Ready %s), desired %d, %+v; want Failed (FailureBudgetExceeded), %d, %+v",
			job.Status.Phase, c.Reason, job.Status.Desired, got, len(s.nodes), want)
	}
	if n := s.podNodes(); n != want.started {
		t.Errorf("pods on %d nodes, want %d (the nodes started)", n, want.started)
	}
	if r := s.recreated(); len(r) > 0 {
		t.Errorf("pods created twice: %v", r)
	}
	evs := events(t, "ImageJob", job.Name)
	if e := findEvent(evs, eraserv1.ReasonFailureBudgetExceeded, "failure budget exceeded"); e == nil || e.Type != corev1.EventTypeWarning {
		t.Errorf("no FailureBudgetExceeded Warning on the job:%s", describeEvents(evs))
	}
	list := s.waitRecorded(time.Minute)
	lc := ready(list.Status.Conditions)
	t.Logf("ImageList Ready: %s/%s: %s", lc.Status, lc.Reason, lc.Message)
	if lc.Reason != eraserv1.ReasonFailureBudgetExceeded || lc.Status != "False" || list.Status.Failed != int64(want.failed) ||
		list.Status.Success != int64(want.succeeded) || list.Status.Skipped != int64(want.skipped) {
		t.Errorf("ImageList Ready %s/%s, success %d, failed %d, skipped %d; want False/FailureBudgetExceeded, %d, %d, %d",
			lc.Status, lc.Reason, list.Status.Success, list.Status.Failed, list.Status.Skipped, want.succeeded, want.failed, want.skipped)
	}
}

// waitWave waits until n worker pods were created, and checks that no more
// come.
func (s *scenario) waitWave(n int) []corev1.Pod {
	s.t.Helper()
	testenv.WaitFor(s.t, 2*time.Minute, fmt.Sprintf("%d worker pods", n), func() bool {
		s.pods()
		return s.podNodes() >= n
	})
	return s.settle(fmt.Sprintf("%d worker pods", n), n)
}

// podNodes is how many nodes had a worker pod so far.
func (s *scenario) podNodes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.podUIDs)
}

// settle fails the test if the worker pods ever created pass n within
// budgetSettle, and returns the pods there are.
func (s *scenario) settle(what string, n int) []corev1.Pod {
	s.t.Helper()
	var pods []corev1.Pod
	for from := time.Now(); time.Since(from) < budgetSettle; time.Sleep(200 * time.Millisecond) {
		pods = s.pods()
		if ever := s.podNodes(); ever > n {
			s.t.Fatalf("%s: pods on %d nodes, want %d", what, ever, n)
		}
	}
	return pods
}

// failWorker plays the kubelet for a worker that failed: the remover exited
// with code exit, its summary saying so.
func (s *scenario) failWorker(p *corev1.Pod, exit int32) {
	s.t.Helper()
	testenv.WaitFor(s.t, 30*time.Second, "pod "+p.Name+" failed", func() bool {
		cur := s.podOn(p.Spec.NodeName)
		if cur == nil {
			return false
		}
		sum := workerresult.Summary{Component: "remover", Node: cur.Spec.NodeName, Error: "fault tier: the remover failed"}
		cur.Status.Phase = corev1.PodFailed
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", Message: string(sum.Encode())}}}}
		return env.Client.Status().Update(s.ctx, cur) == nil
	})
}

// podOn is the worker pod on the node, or nil.
func (s *scenario) podOn(node string) *corev1.Pod {
	for _, p := range s.pods() {
		if p.Spec.NodeName == node {
			return &p
		}
	}
	return nil
}
