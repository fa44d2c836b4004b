package fault_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/kname"
)

// stuckFinalizer keeps a worker pod terminating, as an unreachable node's
// kubelet that never confirms the deletion does.
const stuckFinalizer = "fault.eraser.sh/stuck"

// TestStalledWaitIsGivenUp: run A's worker on node n0 never starts, n0
// goes NotReady, and A's pod, timed out and deleted, stays Terminating
// (a finalizer, as on an unreachable node). Run B, created while n0 was
// Ready, waits for n0 behind A's worker. B ends within nodeWaitTimeout
// of n0 going NotReady: n0 fails WaitTimedOut (no pod of B created there),
// naming A's worker, with a NodeFailed Event; B's other node succeeds.
func TestStalledWaitIsGivenUp(t *testing.T) {
	s := newScenario(t, "fault-stall", nil)
	nodes := s.addNodes(s.ns, 2)
	n0, n1 := nodes[0], nodes[1]
	for _, n := range nodes {
		s.setNodeReady(n, true)
	}
	const wait = 20 * time.Second
	s.startManager("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
		"manager: {imageJob: {podStartTimeout: 15s, successRatio: 0, nodeWaitTimeout: 20s, cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n")
	a, b := s.ns+"-a", s.ns+"-b"
	s.createNamedList(a)
	// A's worker on n0 stays Pending, and Terminating once deleted.
	var held *corev1.Pod
	testenv.WaitFor(t, 2*time.Minute, "run A's worker on "+n0, func() bool {
		s.kubelet(func(node string) bool { return node == n1 })
		for _, p := range s.pods() {
			if p.Spec.NodeName == n0 && p.Labels[podspec.LabelJob] != "" {
				held = &p
				return true
			}
		}
		return false
	})
	s.addFinalizer(held)
	jobA := s.listJob(a, 2*time.Minute, "run A to start", func(j *eraserv1.ImageJob) bool { return j.Status.Started == 2 })

	s.createNamedList(b)
	s.listJob(b, 2*time.Minute, "run B to wait for "+n0, func(j *eraserv1.ImageJob) bool {
		s.kubeletPods(func(p *corev1.Pod) bool { return p.Spec.NodeName == n1 })
		return j.Status.Waiting == 1 && j.Status.QueuedBehind == jobA.Name
	})
	s.setNodeReady(n0, false)
	notReady := time.Now()

	jobB := s.listJob(b, 3*time.Minute, "run B to end", func(j *eraserv1.ImageJob) bool {
		s.kubeletPods(func(p *corev1.Pod) bool { return p.Spec.NodeName == n1 })
		return finished(j)
	})
	t.Logf("run B %s %v after %s went NotReady (nodeWaitTimeout %v)", jobB.Status.Phase, time.Since(notReady).Round(time.Second), n0, wait)
	if jobB.Status.Succeeded != 1 || jobB.Status.Failed != 1 || jobB.Status.Waiting != 0 {
		t.Errorf("run B succeeded %d, failed %d, waiting %d; want 1, 1, 0", jobB.Status.Succeeded, jobB.Status.Failed, jobB.Status.Waiting)
	}
	var got *eraserv1.NodeFailure
	for i, f := range jobB.Status.FailedNodes {
		if f.Node == n0 {
			got = &jobB.Status.FailedNodes[i]
		}
	}
	if got == nil || got.Reason != "WaitTimedOut" || !strings.Contains(got.Message, jobA.Name) || !strings.Contains(got.Message, "nodeWaitTimeout") {
		t.Errorf("run B's failure on %s: %+v; want WaitTimedOut naming %s and nodeWaitTimeout", n0, got, jobA.Name)
	} else {
		t.Logf("run B's failure on %s: %s: %s", n0, got.Reason, got.Message)
	}
	if got := jobB.Status.FailedIndexes["WaitTimedOut"]; got == "" {
		t.Errorf("failedIndexes %v, want WaitTimedOut recorded", jobB.Status.FailedIndexes)
	}
	for _, p := range s.pods() {
		if p.Spec.NodeName == n0 && p.Labels[podspec.LabelJob] == jobB.Name {
			t.Errorf("run B created pod %s on %s, which it gave up", p.Name, n0)
		}
	}
	// The report names the node not started, with the cause.
	testenv.WaitFor(t, 5*time.Minute, "run B's report complete", func() bool {
		jobB = s.listJob(b, time.Minute, "run B", finished)
		return jobB.Status.Report != nil && jobB.Status.Report.Complete
	})
	out, err := reportcmd.Load(s.ctx, env.Client, "imagejob/"+jobB.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]string{}
	for _, n := range out.Nodes {
		reported[n.Name] = n.Reason
	}
	if diff := cmp.Diff(map[string]string{n0: "NotStarted/WaitTimedOut"}, map[string]string{n0: reported[n0]}); diff != "" {
		t.Errorf("run B's report on %s (-want +got):\n%s", n0, diff)
	}
	evs := eventsUntil(t, "ImageJob", jobB.Name, 30*time.Second, func(evs []corev1.Event) bool {
		return findEvent(evs, "NodeFailed", "WaitTimedOut", n0) != nil
	})
	if findEvent(evs, "NodeFailed", "WaitTimedOut", n0) == nil {
		t.Errorf("no NodeFailed Event naming %s WaitTimedOut; events:%s", n0, describeEvents(evs))
	}
}

// createNamedList creates an ImageList of the given name, deleted when the
// test ends.
func (s *scenario) createNamedList(name string) {
	s.t.Helper()
	if err := env.Client.Create(s.ctx, builder.MakeImageList(name).Images("docker.io/library/alpine:3.7.3").Obj()); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = env.Client.Delete(s.ctx, &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}}) })
}

// listJob waits for the named list's job to satisfy cond and returns it.
func (s *scenario) listJob(list string, timeout time.Duration, what string, cond func(*eraserv1.ImageJob) bool) *eraserv1.ImageJob {
	s.t.Helper()
	var job *eraserv1.ImageJob
	testenv.WaitFor(s.t, timeout, what, func() bool {
		var jobs eraserv1.ImageJobList
		if env.Client.List(s.ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: kname.LabelValue(list)}) != nil || len(jobs.Items) != 1 {
			return false
		}
		job = &jobs.Items[0]
		return cond(job)
	})
	return job
}

// addFinalizer keeps the pod from going once deleted; the finalizer is
// removed when the test ends, so that the scenario's cleanup can delete it.
func (s *scenario) addFinalizer(p *corev1.Pod) {
	s.t.Helper()
	key := client.ObjectKeyFromObject(p)
	testenv.WaitFor(s.t, 30*time.Second, "a finalizer on pod "+p.Name, func() bool {
		cur := &corev1.Pod{}
		if env.Client.Get(s.ctx, key, cur) != nil {
			return false
		}
		cur.Finalizers = append(cur.Finalizers, stuckFinalizer)
		return env.Client.Update(s.ctx, cur) == nil
	})
	s.t.Cleanup(func() {
		for range 50 {
			cur := &corev1.Pod{}
			if env.Client.Get(s.ctx, key, cur) != nil {
				return
			}
			cur.Finalizers = nil
			if env.Client.Update(s.ctx, cur) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
