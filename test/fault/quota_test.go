package fault_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestQuotaAdmitsSome: a ResourceQuota admits 2 worker pods for 5 nodes.
// The 2 nodes run and succeed; the other 3 are retried with backoff and fail
// with CreateFailed and the quota's message once podStartTimeout passes; the
// job then ends by the success ratio (0.4 here: Completed).
func TestQuotaAdmitsSome(t *testing.T) {
	s := newScenario(t, "fault-quota", nil)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "two-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}}}
	if err := env.Client.Create(s.ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: publish the usage it would, once;
	// admission counts the admitted pods from there.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := env.Client.Status().Update(s.ctx, quota); err != nil {
		t.Fatal(err)
	}
	const timeout = 15 * time.Second
	s.addNodes(s.ns, 5)
	before := podCreates(t, "403")
	mgr := s.startManager(config("15s", "0.4", "0", ""))
	s.createList()
	begin := time.Now()

	job := s.waitJob(90*time.Second, "the job to finish", func() { s.kubelet(nil) }, finished)
	took := time.Since(begin)
	t.Logf("job %s %s after %v", job.Name, job.Status.Phase, took.Round(100*time.Millisecond))
	if took < timeout {
		t.Errorf("the job ended after %v, before the start timeout of %v", took, timeout)
	}
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Phase != eraserv1.PhaseCompleted || c.Reason != eraserv1.ReasonSucceeded ||
		job.Status.Succeeded != 2 || job.Status.Failed != 3 || !strings.Contains(c.Message, "2 of 5 nodes succeeded") {
		t.Errorf("job %s, Ready %s %q, succeeded %d failed %d; want Completed with 2 succeeded and 3 failed",
			job.Status.Phase, c.Reason, c.Message, job.Status.Succeeded, job.Status.Failed)
	}
	if len(job.Status.FailedNodes) != 3 {
		t.Errorf("failedNodes %+v, want 3", job.Status.FailedNodes)
	}
	for _, f := range job.Status.FailedNodes {
		t.Logf("failed node %s: %s: %s", f.Node, f.Reason, f.Message)
		if f.Reason != "CreateFailed" || !strings.Contains(f.Message, "exceeded quota: two-pods") ||
			!strings.Contains(f.Message, "could not be created in 15s") {
			t.Errorf("failed node %+v, want CreateFailed with the quota's message", f)
		}
	}
	if got, want := job.Status.Results, s.writtenSum(); got == nil || got.Removed != want {
		t.Errorf("results %+v, want removed %d", got, want)
	}
	if n := len(s.podUIDs); n != 2 {
		t.Errorf("pods on %d nodes, want the 2 the quota admitted", n)
	}
	refused := podCreates(t, "403") - before
	t.Logf("pod creations refused by the quota: %d for 3 nodes in %v", refused, timeout)
	// Backoff 1s, 2s, 4s, 8s: about 5 attempts per node in 15 s.
	if refused > 3*6 {
		t.Errorf("%d refused creations for 3 nodes in %v: no backoff?", refused, timeout)
	}

	list := s.waitRecorded(30 * time.Second)
	if lc := ready(list.Status.Conditions); lc.Reason != eraserv1.ReasonSucceeded || list.Status.Success != 2 || list.Status.Failed != 3 {
		t.Errorf("ImageList Ready %s %q, success %d failed %d", lc.Reason, lc.Message, list.Status.Success, list.Status.Failed)
	}
	var evs []corev1.Event
	testenv.WaitFor(t, 20*time.Second, "CreateFailed, NodeFailed and Completed Events", func() bool {
		evs = events(t, "ImageJob", job.Name)
		return findEvent(evs, "CreateFailed", "exceeded quota") != nil && findEvent(evs, "NodeFailed", "CreateFailed") != nil &&
			findEvent(evs, "Completed") != nil
	})
	t.Logf("ImageJob events:%s", describeEvents(evs))
	n, refusals := 0, 0
	for _, e := range evs {
		if e.Reason == "CreateFailed" {
			refusals++
		}
		if e.Reason == "NodeFailed" {
			n++
			if e.Count > 1 {
				t.Errorf("NodeFailed Event repeated %d times: %s", e.Count, e.Message)
			}
		}
	}
	// Failures found in one pass are announced in one Event naming them.
	if e := findEvent(evs, "NodeFailed", "3 node(s) failed"); n != 1 || e == nil {
		t.Errorf("%d NodeFailed Events, want one naming the 3 failed nodes", n)
	}
	// One cause, one Event: the manager announces each distinct refusal
	// once, by the API server's message without the pod (whose name has the
	// node's).
	if refusals != 1 {
		t.Errorf("%d CreateFailed Events for one quota refusing 3 nodes, want 1", refusals)
	}
	if l := mgr.Lines(`"reason":"CreateFailed"`); len(l) > 0 {
		t.Logf("manager log: %s", l[0])
	}
}
