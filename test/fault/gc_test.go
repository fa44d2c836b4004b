package fault_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// gcWait bounds what waits for the garbage collector: it acts within a
// second or two when idle, far later on two busy cores (its informers
// resync, discovery is re-read every 30 s).
const gcWait = 2 * time.Minute

// TestGarbageCollectorTakesADeletedJobsPods is the baseline of the
// scenarios that rely on the garbage collector: a job the real manager
// created, with its worker pods and data ConfigMap, is deleted as kubectl
// deletes it (background propagation) while no manager runs, and the
// collector alone deletes its pods and data.
func TestGarbageCollectorTakesADeletedJobsPods(t *testing.T) {
	env.RequireGarbageCollector(t)
	s := newScenario(t, "fault-gc", nil)
	const nodes = 3
	s.addNodes(s.ns, nodes)
	mgr := s.startManager(config("10m", "1", "0", ""))
	s.keepGCLog()
	s.createList()

	var job eraserv1.ImageJob
	testenv.WaitFor(t, 2*time.Minute, "the job's pods on every node", func() bool {
		jobs, err := s.jobs()
		if err != nil || len(jobs) != 1 {
			return false
		}
		job = jobs[0]
		return len(s.podsOf(job.UID)) == nodes
	})
	// Stopped, so that only the collector can delete anything.
	_ = mgr.Cmd.Process.Kill()
	dataKey := client.ObjectKey{Namespace: s.ns, Name: job.Name}
	if err := env.Client.Get(s.ctx, dataKey, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the job's data ConfigMap: %v", err)
	}

	deleted := time.Now()
	if err := env.Client.Delete(s.ctx, &job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, gcWait, "the garbage collector to delete the job's pods and data", func() bool {
		s.reap()
		return len(s.podsOf(job.UID)) == 0 && apierrors.IsNotFound(env.Client.Get(s.ctx, dataKey, &corev1.ConfigMap{}))
	})
	t.Logf("job %s: its %d pods and data ConfigMap deleted %v after the job", job.Name, nodes, time.Since(deleted).Round(100*time.Millisecond))
}

// keepGCLog shows kube-controller-manager's log when the test fails.
func (s *scenario) keepGCLog() {
	s.t.Cleanup(func() {
		if s.t.Failed() {
			s.t.Logf("kube-controller-manager log, last 60 lines:\n%s", env.ControllerManagerLog(60))
		}
	})
}

// reap plays the kubelet's part in a pod's deletion: a pod bound to a node
// is only marked for deletion by the API server (the collector's delete
// too) until its kubelet, having stopped its containers, deletes it for
// good. Errors are left for the next round.
func (s *scenario) reap() {
	for _, p := range s.pods() {
		if p.DeletionTimestamp != nil {
			_ = env.Client.Delete(s.ctx, &p, client.GracePeriodSeconds(0), client.Preconditions{UID: &p.UID})
		}
	}
}

// podsOf are the scenario's worker pods whose controller is the job of
// that UID: a pod of another run under the same job name is not one.
func (s *scenario) podsOf(job types.UID) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods() {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job {
			out = append(out, p)
		}
	}
	return out
}

// kubeletFor plays the node agents for the job of that UID only, as
// kubelet does: each pending pod succeeds with a remover summary.
func (s *scenario) kubeletFor(job types.UID) {
	owned := map[string]bool{}
	for _, p := range s.podsOf(job) {
		owned[p.Name] = true
	}
	s.kubeletPods(func(p *corev1.Pod) bool { return owned[p.Name] })
}

// deleteAndSettle deletes the job as `kubectl delete imagejob` does and
// waits until it and its pods are gone.
func (s *scenario) deleteAndSettle(job *eraserv1.ImageJob) {
	s.t.Helper()
	if err := env.Client.Delete(s.ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		s.t.Fatal(err)
	}
	testenv.WaitFor(s.t, gcWait, fmt.Sprintf("job %s and its pods to be gone", job.Name), func() bool {
		// Gone means this job, not a job of the same name since.
		var j eraserv1.ImageJob
		err := env.Client.Get(s.ctx, client.ObjectKey{Name: job.Name}, &j)
		gone := apierrors.IsNotFound(err) || (err == nil && j.UID != job.UID)
		s.reap()
		return gone && len(s.podsOf(job.UID)) == 0
	})
}
