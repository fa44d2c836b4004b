package fault_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// The skewed-clock scenarios (one clock): the real manager with
// its clock 10 minutes ahead of the API server's and the kubelet's, and 10
// minutes behind (skew_proxy_test.go says how).

// skewStart and skewRun are the scenarios' podStartTimeout and
// podRunTimeout: far below the skew, so that a timeout measured against
// the API server's or the kubelet's timestamps fires at once (manager
// ahead) or 10 minutes late (manager behind).
const skewStart, skewRun = time.Minute, 90 * time.Second

const skewConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {imageJob: {podStartTimeout: 1m, podRunTimeout: 90s, cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n"

// The kubelet's timeline, from the worker pods' creation: the manager is
// restarted (a new leader, which saw none of the pods start), the prompt
// node's pod starts well within the start timeout and finishes well within
// the run timeout.
const (
	skewRestartAt     = 15 * time.Second
	skewPromptStarts  = 30 * time.Second
	skewPromptRunsFor = 30 * time.Second
)

// TestSkewManagerAhead: the manager's clock 10 minutes ahead. Every
// timestamp it reads (pods' creation and start, the kubelet's) is 10
// minutes old to it: no node may fail early for that.
func TestSkewManagerAhead(t *testing.T) { testSkew(t, "fault-skew-ahead", 10*time.Minute) }

// TestSkewManagerBehind: the manager's clock 10 minutes behind. Every
// timestamp it reads lies 10 minutes in its future: the timeouts must
// still fire on time.
func TestSkewManagerBehind(t *testing.T) { testSkew(t, "fault-skew-behind", -10*time.Minute) }

// testSkew: three nodes, an ImageList, and a manager restarted mid-run.
// One node's pod starts after 30 s and succeeds 30 s later: it
// succeeds (no start or run timeout fired early). One stays Pending
// (ImagePullBackOff): StartTimeout, no sooner than podStartTimeout after
// its creation and within three of them. One runs for ever: RunTimeout, no
// sooner than podRunTimeout after it started and within three of them.
func testSkew(t *testing.T, ns string, offset time.Duration) {
	s := newScenario(t, ns, nil)
	proxy := newSkewProxy(t, offset)
	names := s.addNodes(s.ns, 3)
	prompt, pending, running := names[0], names[1], names[2]
	mgr := s.startSkewedManager(proxy, skewConfig)
	s.createList()
	testenv.WaitFor(t, 2*time.Minute, "a worker pod on each node", func() bool { return len(s.pods()) == len(names) })
	created := map[string]time.Time{}
	for _, p := range s.pods() {
		created[p.Spec.NodeName] = p.CreationTimestamp.Time
	}
	// The pods' creation, on the API server's clock (truncated to seconds).
	t0 := created[prompt]
	s.podStatus(pending, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "fault tier: the image cannot be pulled"}}}}
	})
	runningAt := s.podRunning(running)

	failedAt := map[string]time.Time{}
	var promptRunning, promptDone, restarted bool
	var job *eraserv1.ImageJob
	testenv.WaitFor(t, 3*skewRun+time.Minute, "the job to finish", func() bool {
		since := time.Since(t0)
		switch {
		case !restarted && since >= skewRestartAt:
			restarted = true
			mgr = s.restartSkewed(proxy, mgr)
		case !promptRunning && since >= skewPromptStarts:
			promptRunning = true
			s.podRunning(prompt)
		case promptRunning && !promptDone && since >= skewPromptStarts+skewPromptRunsFor:
			promptDone = true
			s.podSucceeded(prompt)
		}
		jobs, err := s.jobs()
		if err != nil || len(jobs) != 1 {
			return false
		}
		job = &jobs[0]
		for _, f := range job.Status.FailedNodes {
			if _, ok := failedAt[f.Node]; !ok {
				failedAt[f.Node] = time.Now()
				t.Logf("%s failed %v after the pods' creation: %s: %s", f.Node, time.Since(t0).Round(time.Second), f.Reason, f.Message)
			}
		}
		return finished(job)
	})
	c := ready(job.Status.Conditions)
	t.Logf("manager clock %+v: job %s %s after %v: %s", offset, job.Name, job.Status.Phase, time.Since(t0).Round(time.Second), c.Message)

	reasons := map[string]string{}
	for _, f := range job.Status.FailedNodes {
		reasons[f.Node] = f.Reason
	}
	if reasons[prompt] != "" || reasons[pending] != "StartTimeout" || reasons[running] != "RunTimeout" || len(reasons) != 2 {
		t.Errorf("failed nodes %v; want %s StartTimeout, %s RunTimeout, %s not failed", reasons, pending, running, prompt)
	}
	if job.Status.Phase != eraserv1.PhaseFailed || job.Status.Succeeded != 1 || job.Status.Failed != 2 {
		t.Errorf("job %s, %d succeeded, %d failed; want Failed with %s succeeded", job.Status.Phase, job.Status.Succeeded, job.Status.Failed, prompt)
	}
	// Never early: the manager created the pod after its creationTimestamp
	// (truncated to the second), and saw it running after the kubelet said so.
	bound := func(node string, from time.Time, timeout time.Duration) {
		at, ok := failedAt[node]
		if !ok {
			return
		}
		if took := at.Sub(from); took < timeout-time.Second || took > 3*timeout {
			t.Errorf("%s failed %v after it began waiting; want between its timeout %v and %v", node, took.Round(time.Second), timeout, 3*timeout)
		}
	}
	bound(pending, created[pending], skewStart)
	bound(running, runningAt, skewRun)
	for _, f := range job.Status.FailedNodes {
		if f.Node == pending && !strings.Contains(f.Message, "ImagePullBackOff") {
			t.Errorf("%s's failure %q does not say why it did not start", pending, f.Message)
		}
	}
	// The skew is real to the API server: the manager's stamps are its clock's.
	if st := job.Status.StartTime; st == nil {
		t.Errorf("job has no startTime")
	} else if d := st.Sub(job.CreationTimestamp.Time) - offset; d < -time.Minute || d > time.Minute {
		t.Errorf("job startTime %s, creationTimestamp %s: the manager's clock is not %+v off", st.UTC(), job.CreationTimestamp.UTC(), offset)
	} else {
		t.Logf("job creationTimestamp (API server) %s, startTime (manager) %s", job.CreationTimestamp.UTC().Format(time.RFC3339), st.UTC().Format(time.RFC3339))
	}
	if l := s.waitRecorded(time.Minute); l.Status.Success != 1 || l.Status.Failed != 2 {
		t.Errorf("ImageList success %d, failed %d; want 1 and 2", l.Status.Success, l.Status.Failed)
	}
	if len(mgr.Lines("Successfully acquired lease")) == 0 {
		t.Errorf("the restarted manager never led")
	}
	proxy.check()
}

// restartSkewed stops the manager (SIGTERM: it hands the lease over) and
// starts another through the same proxy.
func (s *scenario) restartSkewed(p *skewProxy, old *managertest.Process) *managertest.Process {
	s.t.Helper()
	if err := old.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	testenv.WaitFor(s.t, time.Minute, "the manager to exit", old.Exited)
	s.t.Logf("manager restarted")
	return s.startSkewedManager(p, skewConfig)
}

// podStatus applies change to the status of the worker pod on node, as its
// kubelet writes it (on the API server's clock).
func (s *scenario) podStatus(node string, change func(*corev1.Pod)) {
	s.t.Helper()
	testenv.WaitFor(s.t, 30*time.Second, "the status of the pod on "+node, func() bool {
		p := s.podOn(node)
		if p == nil {
			return false
		}
		change(p)
		return env.Client.Status().Update(s.ctx, p) == nil
	})
}

// podRunning starts the pod on node, and returns when the kubelet said so.
func (s *scenario) podRunning(node string) time.Time {
	s.t.Helper()
	at := time.Now()
	s.podStatus(node, func(p *corev1.Pod) {
		now := metav1.Now()
		p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
	})
	return at
}

// podSucceeded ends the pod on node with a remover summary.
func (s *scenario) podSucceeded(node string) {
	s.t.Helper()
	s.podStatus(node, func(p *corev1.Pod) {
		sum := workerresult.Summary{Component: "remover", Node: node, Counts: map[string]int{"removed": removedOn(node)}, BytesFreed: 1000}
		started := metav1.Time{Time: p.CreationTimestamp.Time}
		if p.Status.StartTime != nil {
			started = *p.Status.StartTime
		}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: string(sum.Encode()),
				StartedAt: started, FinishedAt: metav1.Now()}}}}
	})
}
