package imagejob

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

const outOfCPU = "Node didn't have enough resource: cpu, requested: 1114, used: 3650, capacity: 4000"

// onePod waits for the job's one pod that is not being deleted.
func (f *fixture) onePod(job string) corev1.Pod {
	f.t.Helper()
	var pod corev1.Pod
	testenv.WaitFor(f.t, time.Minute, "the job's one pod", func() bool {
		var live []corev1.Pod
		for _, p := range f.pods(job) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		if len(live) == 1 {
			pod = live[0]
		}
		return len(live) == 1
	})
	return pod
}

// TestPodRefusedAtAdmission: the node's kubelet refuses the first pod
// (OutOfcpu, a packed node); the manager deletes it and, after the creation
// backoff, creates another, which the node admits and runs: the node
// succeeds, and the refusal is a Warning Event, not a failure.
func TestPodRefusedAtAdmission(t *testing.T) {
	f := newFixture(t)
	kubelet := managertest.FakeKubelet{Client: env.Client, Namespace: f.ns}
	f.nodes(builder.MakeNode("packed").Obj())
	f.job("admission", podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m}}", "*")
	f.reconcile("admission")
	f.reconcile("admission")
	first := f.onePod("admission")
	if err := kubelet.Refuse(f.ctx, &first, "OutOfcpu", outOfCPU); err != nil {
		t.Fatal(err)
	}
	res := f.reconcile("admission")
	if job := f.get("admission"); job.Status.Phase != eraserv1.PhaseRunning || job.Status.Failed != 0 {
		t.Fatalf("status %+v, want Running with no failure while the node's pod is recreated", job.Status)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 2*time.Second {
		t.Errorf("requeue after %v, want the first backoff (1-2s)", res.RequeueAfter)
	}
	f.expectEvent(eraserv1.ReasonNotAdmitted)
	testenv.WaitFor(t, time.Minute, "the refused pod to be deleted", func() bool {
		for _, p := range f.pods("admission") {
			if p.UID == first.UID {
				return false
			}
		}
		return true
	})
	f.clock.Step(2 * time.Second)
	f.reconcile("admission")
	second := f.onePod("admission")
	if second.UID == first.UID {
		t.Fatal("the refused pod was not replaced")
	}
	if _, err := kubelet.Finish(f.ctx, nil); err != nil {
		t.Fatal(err)
	}
	f.reconcile("admission")
	job := f.get("admission")
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 1 || job.Status.Failed != 0 {
		t.Fatalf("status %+v, want Completed with the node succeeded", job.Status)
	}
}

// TestPodNeverAdmitted: a node whose kubelet refuses every pod fails once
// none was admitted within podStartTimeout, NotAdmitted, with the kubelet's
// words.
func TestPodNeverAdmitted(t *testing.T) {
	f := newFixture(t)
	kubelet := managertest.FakeKubelet{Client: env.Client, Namespace: f.ns}
	f.nodes(builder.MakeNode("packed").Obj())
	f.job("never", podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m}}", "*")
	f.reconcile("never")
	f.reconcile("never")
	attempts := 0
	for f.get("never").Status.Phase == eraserv1.PhaseRunning {
		if attempts++; attempts > 20 {
			t.Fatal("the node never failed")
		}
		for _, p := range f.pods("never") {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending {
				if err := kubelet.Refuse(f.ctx, &p, "OutOfcpu", outOfCPU); err != nil {
					t.Fatal(err)
				}
			}
		}
		f.reconcile("never")
		f.clock.Step(30 * time.Second)
		f.reconcile("never")
	}
	job := f.get("never")
	if job.Status.Phase != eraserv1.PhaseFailed || len(job.Status.FailedNodes) != 1 {
		t.Fatalf("status %+v, want Failed with the node", job.Status)
	}
	fn := job.Status.FailedNodes[0]
	if fn.Reason != eraserv1.ReasonNotAdmitted || !strings.Contains(fn.Message, "refused the pod at admission") || !strings.Contains(fn.Message, "OutOfcpu: Pod was rejected") {
		t.Errorf("failed node %+v, want %s with the kubelet's words", fn, eraserv1.ReasonNotAdmitted)
	}
	if attempts < 3 {
		t.Errorf("%d attempts, want the pod recreated several times", attempts)
	}
}
