package fault_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestHundredPodsNeverStart: 100 nodes whose worker pods stay Pending (an
// image that cannot be pulled, a node agent down). Every node fails with
// StartTimeout at podStartTimeout, the pods are deleted, the job Fails;
// the status names 32 nodes and counts 100, and each node is announced by
// one NodeFailed Event, never repeated.
func TestHundredPodsNeverStart(t *testing.T) {
	s := newScenario(t, "fault-pending", nil)
	const nodes, timeout = 100, 15 * time.Second
	s.addNodes(s.ns, nodes)
	mgr := s.startManager(config("15s", "1", "0", ""))
	s.createList()
	begin := time.Now()
	testenv.WaitFor(t, 30*time.Second, "100 worker pods", func() bool { return len(s.pods()) == nodes })
	t.Logf("100 pods created in %v", time.Since(begin).Round(100*time.Millisecond))

	job := s.waitJob(60*time.Second, "the job to fail", nil, finished)
	took := time.Since(begin)
	t.Logf("job %s %s after %v", job.Name, job.Status.Phase, took.Round(100*time.Millisecond))
	// The timeout counts on the manager's clock from the pods' creation,
	// which came after begin: never less than the timeout.
	if took < timeout {
		t.Errorf("the job ended after %v, before the start timeout of %v", took, timeout)
	}
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Phase != eraserv1.PhaseFailed || c.Reason != eraserv1.ReasonFailed || job.Status.Failed != nodes ||
		job.Status.Succeeded != 0 || !strings.Contains(c.Message, "0 of 100 nodes succeeded") || !strings.Contains(c.Message, "and 95 more") {
		t.Errorf("job %s, Ready %s %q, failed %d", job.Status.Phase, c.Reason, c.Message, job.Status.Failed)
	}
	if n := len(job.Status.FailedNodes); n != eraserv1.MaxReportedNodes {
		t.Errorf("%d failedNodes, want %d", n, eraserv1.MaxReportedNodes)
	}
	for _, f := range job.Status.FailedNodes {
		if f.Reason != "StartTimeout" || f.Message != "did not start within 15s" {
			t.Errorf("failed node %+v, want StartTimeout", f)
		}
	}
	if len(job.Status.FailedNodes) > 0 {
		f := job.Status.FailedNodes[0]
		t.Logf("failedNodes[0] (of %d): %s: %s: %s", len(job.Status.FailedNodes), f.Node, f.Reason, f.Message)
	}
	// Deleted: gone, or terminating (no kubelet here confirms the deletion
	// of a pod bound to a node, as on a node that is down).
	testenv.WaitFor(t, 20*time.Second, "every timed-out pod deleted", func() bool {
		for _, p := range s.pods() {
			if p.DeletionTimestamp == nil {
				return false
			}
		}
		return true
	})
	list := s.waitRecorded(30 * time.Second)
	if lc := ready(list.Status.Conditions); lc.Reason != eraserv1.ReasonFailed || list.Status.Failed != nodes {
		t.Errorf("ImageList Ready %s %q, failed %d", lc.Reason, lc.Message, list.Status.Failed)
	}

	// The Events: failures found in one pass are announced in one Event
	// naming a few and counting the rest, so that the Event recorder's
	// per-object budget (it drops an object's Events past 25) still lets
	// the job's outcome through. The status counts every failure.
	// announced counts the nodes the NodeFailed Events name, and the
	// Events that do not say how many.
	announced := func(evs []corev1.Event) (n int, uncounted []string) {
		for _, e := range evs {
			if e.Reason != "NodeFailed" {
				continue
			}
			var k int
			if _, err := fmt.Sscanf(e.Message, "%d node(s) failed", &k); err != nil {
				uncounted = append(uncounted, e.Message)
			}
			n += k * int(max(e.Count, 1))
		}
		return n, uncounted
	}
	outcome := func(evs []corev1.Event) bool {
		return findEvent(evs, string(eraserv1.PhaseFailed), "0 of 100 nodes succeeded") != nil
	}
	evs := eventsUntil(t, "ImageJob", job.Name, time.Minute, func(evs []corev1.Event) bool {
		n, _ := announced(evs)
		return outcome(evs) && n >= nodes
	})
	t.Logf("ImageJob Events in the API: %d objects:%s", len(evs), describeEvents(evs))
	n, uncounted := announced(evs)
	if n != nodes {
		t.Errorf("NodeFailed Events announce %d failed nodes, want %d", n, nodes)
	}
	for _, m := range uncounted {
		t.Errorf("NodeFailed Event %q does not count its nodes", m)
	}
	if !outcome(evs) {
		t.Errorf("no Failed Event with the job's outcome on the ImageJob: the manager emitted it (%d log lines) but it never reached the API server",
			len(mgr.Lines(`"reason":"Failed"`, "0 of 100 nodes succeeded")))
	}
	listEvs := eventsUntil(t, "ImageList", s.list, time.Minute, func(evs []corev1.Event) bool { return findEvent(evs, "JobFailed") != nil })
	if e := findEvent(listEvs, "JobFailed"); e == nil {
		t.Errorf("no JobFailed Event on the ImageList")
	} else {
		t.Logf("ImageList Event: %s %s: %.200s", e.Type, e.Reason, e.Message)
	}
}
