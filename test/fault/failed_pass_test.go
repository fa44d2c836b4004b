package fault_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestRefusedRunFreesItsNodes: run A holds n0 (its worker runs). A
// ResourceQuota then refuses every pod: run B waits for n0 behind A and its
// pods on n1 and n2 are refused, so B fails PodsRefused. The quota is
// removed and run C comes. Once A's worker ends, n0 goes to C at once: B,
// failed, neither holds nor waits for any node any more; C ends Completed
// with a worker on every node.
func TestRefusedRunFreesItsNodes(t *testing.T) {
	s := newScenario(t, "fault-freed", nil)
	nodes := s.addNodes(s.ns, 3)
	n0 := nodes[0]
	s.startManager(config("2m", "1", "0", ""))
	a, b, c := s.ns+"-a", s.ns+"-b", s.ns+"-c"
	s.createNamedList(a)
	notN0 := func(p *corev1.Pod) bool { return p.Spec.NodeName != n0 }
	jobA := s.listJob(a, 2*time.Minute, "run A to start on every node", func(j *eraserv1.ImageJob) bool {
		s.kubeletPods(notN0)
		return j.Status.Started == 3 && j.Status.Succeeded == 2
	})

	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := env.Client.Create(s.ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: publish the usage it would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := env.Client.Status().Update(s.ctx, quota); err != nil {
		t.Fatal(err)
	}
	s.createNamedList(b)
	jobB := s.listJob(b, 2*time.Minute, "run B to fail PodsRefused", finished)
	if c := ready(jobB.Status.Conditions); jobB.Status.Phase != eraserv1.PhaseFailed || c.Reason != "PodsRefused" {
		t.Fatalf("run B %s, Ready %s: %s; want Failed, PodsRefused", jobB.Status.Phase, c.Reason, c.Message)
	}
	if err := env.Client.Delete(s.ctx, quota); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the quota to be gone", func() bool {
		return env.Client.Get(s.ctx, client.ObjectKeyFromObject(quota), &corev1.ResourceQuota{}) != nil
	})

	s.createNamedList(c)
	s.listJob(c, 2*time.Minute, "run C to start on n1 and n2 and wait for n0", func(j *eraserv1.ImageJob) bool {
		return j.Status.Started == 3 && j.Status.Waiting == 1
	})
	// A's worker on n0 ends: n0 is free, and no run but C wants it.
	s.kubeletPods(func(p *corev1.Pod) bool { return p.Spec.NodeName == n0 && p.Labels[podspec.LabelJob] == jobA.Name })
	jobC := s.listJob(c, 2*time.Minute, "run C to end", func(j *eraserv1.ImageJob) bool {
		s.kubelet(nil)
		return finished(j)
	})
	if jobC.Status.Phase != eraserv1.PhaseCompleted || jobC.Status.Succeeded != 3 {
		t.Errorf("run C %s with %d succeeded (queued behind %q); want Completed on all 3 nodes", jobC.Status.Phase, jobC.Status.Succeeded, jobC.Status.QueuedBehind)
	}
}
