package fault_test

import (
	"strings"
	"testing"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
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
	waitFor(t, 30*time.Second, "100 worker pods", func() bool { return len(s.pods()) == nodes })
	t.Logf("100 pods created in %v", time.Since(begin).Round(100*time.Millisecond))

	job := s.waitJob(60*time.Second, "the job to fail", nil, finished)
	took := time.Since(begin)
	t.Logf("job %s %s after %v", job.Name, job.Status.Phase, took.Round(100*time.Millisecond))
	// Pods' creation timestamps have whole seconds: a timeout measured
	// from them may end up to a second early.
	if took < timeout-time.Second {
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
	waitFor(t, 20*time.Second, "every timed-out pod deleted", func() bool {
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

	// The Events: the manager emits one NodeFailed per node, once (its log
	// shows every Event it emits) and the job's outcome.
	byNode := map[string]int{}
	for _, l := range mgr.lines(`"reason":"NodeFailed"`) {
		i := strings.Index(l, `"msg":"node `)
		if i < 0 {
			continue
		}
		node, _, _ := strings.Cut(l[i+len(`"msg":"node `):], ":")
		byNode[node]++
	}
	for node, n := range byNode {
		if n > 1 {
			t.Errorf("node %s announced %d times", node, n)
		}
	}
	if len(byNode) != nodes {
		t.Errorf("the manager emitted NodeFailed for %d nodes, want %d", len(byNode), nodes)
	}
	// What reaches the API server, which is what a user sees.
	time.Sleep(3 * time.Second) // the recorder sends asynchronously
	evs := events(t, "ImageJob", job.Name)
	distinct, occurrences, combined := 0, int32(0), 0
	for _, e := range evs {
		if e.Reason != "NodeFailed" {
			continue
		}
		occurrences += max(e.Count, 1)
		if strings.HasPrefix(e.Message, "(combined from similar events)") {
			combined++
			continue
		}
		distinct++
		if e.Count > 1 {
			t.Errorf("NodeFailed Event repeated %d times: %s", e.Count, e.Message)
		}
	}
	t.Logf("ImageJob Events in the API: %d objects: NodeFailed: %d single, %d combined, %d occurrences for %d failed nodes:%s",
		len(evs), distinct, combined, occurrences, nodes, describeEvents(evs[max(0, len(evs)-3):]))
	if occurrences < nodes {
		t.Errorf("the API server has NodeFailed Events for %d of %d failed nodes (client-go's Event correlator aggregates "+
			"after 10 similar Events and drops an object's Events of one type after 25)", occurrences, nodes)
	}
	if findEvent(evs, string(eraserv1.PhaseFailed), "0 of 100 nodes succeeded") == nil {
		t.Errorf("no Failed Event with the job's outcome on the ImageJob: the manager emitted it (%d log lines) but it never reached the API server",
			len(mgr.lines(`"reason":"Failed"`, "0 of 100 nodes succeeded")))
	}
	if e := findEvent(events(t, "ImageList", s.list), "JobFailed"); e == nil {
		t.Errorf("no JobFailed Event on the ImageList")
	} else {
		t.Logf("ImageList Event: %s %s: %.200s", e.Type, e.Reason, e.Message)
	}
}
