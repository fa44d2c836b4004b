package fault_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// refusedJob runs an ImageList on nodes whose every worker pod the API server
// refuses, and checks what the user sees: the job Failed at once with
// PodsRefused and the API server's answer (every part of want), the same on
// the ImageList, a Warning Event on each, and no pod. It returns the job and
// the manager.
func refusedJob(t *testing.T, s *scenario, doc string, nodes int, want ...string) (*eraserv1.ImageJob, *managertest.Process) {
	t.Helper()
	s.addNodes(s.ns, nodes)
	mgr := s.startManager(doc)
	s.createList()
	begin := time.Now()
	job := s.waitJob(60*time.Second, "the job to fail", nil, finished)
	t.Logf("job %s %s %v after the ImageList was created", job.Name, job.Status.Phase, time.Since(begin).Round(100*time.Millisecond))

	c := ready(job.Status.Conditions)
	if job.Status.Phase != eraserv1.PhaseFailed || c.Status != metav1.ConditionFalse || c.Reason != "PodsRefused" {
		t.Errorf("job phase %q, Ready %s/%s, want Failed, False/PodsRefused", job.Status.Phase, c.Status, c.Reason)
	}
	for _, w := range append([]string{"the API server refused the worker pods"}, want...) {
		if !strings.Contains(c.Message, w) {
			t.Errorf("Ready message does not say %q: %s", w, c.Message)
		}
	}
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Succeeded != 0 || job.Status.CompletionTime == nil || job.Status.DeleteAfter == nil {
		t.Errorf("job status %+v", job.Status)
	}
	if pods := s.pods(); len(pods) != 0 {
		t.Errorf("%d worker pods exist", len(pods))
	}

	list := s.waitRecorded(30 * time.Second)
	lc := ready(list.Status.Conditions)
	if lc.Status != metav1.ConditionFalse || lc.Reason != eraserv1.ReasonFailed || !strings.Contains(lc.Message, want[0]) {
		t.Errorf("ImageList Ready %s/%s %q, want False/Failed naming %q", lc.Status, lc.Reason, lc.Message, want[0])
	}
	t.Logf("ImageList Ready: %s/%s: %s (success %d, failed %d)", lc.Status, lc.Reason, lc.Message, list.Status.Success, list.Status.Failed)

	var jobEvents []corev1.Event
	testenv.WaitFor(t, 20*time.Second, "a PodsRefused Event on the job and JobFailed on the list", func() bool {
		jobEvents = events(t, "ImageJob", job.Name)
		return findEvent(jobEvents, "PodsRefused", want[0]) != nil && findEvent(events(t, "ImageList", s.list), "JobFailed", want[0]) != nil
	})
	if e := findEvent(jobEvents, "PodsRefused"); e.Type != corev1.EventTypeWarning || e.Namespace != metav1.NamespaceDefault {
		t.Errorf("PodsRefused Event %s in %q, want Warning in default", e.Type, e.Namespace)
	}
	t.Logf("ImageJob events:%s", describeEvents(jobEvents))
	// The manager logs the Events it emits (debug).
	if l := mgr.Lines(`"reason":"PodsRefused"`); len(l) == 0 {
		t.Errorf("no PodsRefused line in the manager's log")
	} else {
		t.Logf("manager log: %s", l[0])
	}
	return job, mgr
}

// TestPodSecurityRefusesWorkers: the manager's namespace enforces Pod
// Security "baseline", which refuses the worker pods (they mount the
// runtime socket from the host). The job fails at once naming PodSecurity,
// and the manager does not keep sending pods the API server refuses.
func TestPodSecurityRefusesWorkers(t *testing.T) {
	s := newScenario(t, "fault-psa", map[string]string{"pod-security.kubernetes.io/enforce": "baseline"})
	const nodes = 3
	before := podCreates(t, "403")
	begin := time.Now()
	refusedJob(t, s, config("20s", "1", "0", ""), nodes, "PodSecurity", "baseline", "hostPath")

	// Watch the refusals for 30 s from the start: one per node, no flood.
	time.Sleep(time.Until(begin.Add(30 * time.Second)))
	refused := podCreates(t, "403") - before
	t.Logf("pod creations refused (403) in 30 s: %d for %d nodes", refused, nodes)
	if refused < nodes || refused >= 3*nodes {
		t.Errorf("%d pod creations refused in 30 s for %d nodes, want %d to %d", refused, nodes, nodes, 3*nodes-1)
	}
	if jobs, _ := s.jobs(); len(jobs) != 1 {
		t.Errorf("%d jobs after 30 s, want the one failed job", len(jobs))
	}
}

// TestMissingPriorityClass: manager.priorityClassName names a PriorityClass
// that does not exist; the Priority admission plugin refuses every pod.
func TestMissingPriorityClass(t *testing.T) {
	s := newScenario(t, "fault-priority", nil)
	before := podCreates(t, "403")
	refusedJob(t, s, config("20s", "1", "0", ", priorityClassName: does-not-exist"), 2,
		"no PriorityClass with name does-not-exist was found")
	if refused := podCreates(t, "403") - before; refused > 2 {
		t.Errorf("%d pod creations refused for 2 nodes", refused)
	}
}
