package fault_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestNodesComeAndGo: a rolling job (one node at a time) runs on nodes 000
// to 003. While node 000's pod is pending, node 000 (its pod's) and node 002
// (not reached yet) are deleted and a node 004 is added. Both deleted nodes
// fail NodeDeleted, with a message telling the two cases apart; the added
// node is not part of this job: a job's nodes are fixed when it starts (the
// next run will include it).
func TestNodesComeAndGo(t *testing.T) {
	s := newScenario(t, "fault-nodes", nil)
	names := s.addNodes(s.ns, 4)
	s.startManager(config("1m", "1", "1", ""))
	s.createList()
	testenv.WaitFor(t, 30*time.Second, "the first pod", func() bool { return len(s.pods()) == 1 })
	job := s.waitJob(10*time.Second, "the job", nil, func(*eraserv1.ImageJob) bool { return true })

	for _, n := range []string{names[0], names[2]} {
		if err := env.Client.Delete(s.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	added := s.ns + "-004"
	if err := env.Client.Create(s.ctx, builder.MakeNode(added).Obj()); err != nil {
		t.Fatal(err)
	}
	s.nodes = append(s.nodes, added)

	// No node agent runs on a deleted node.
	alive := func(n string) bool { return n != names[0] && n != names[2] }
	job = s.waitJob(60*time.Second, "the job to finish", func() { s.kubelet(alive) }, finished)
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Phase != eraserv1.PhaseFailed || job.Status.Desired != 4 || job.Status.Succeeded != 2 || job.Status.Failed != 2 {
		t.Errorf("job %s desired %d succeeded %d failed %d; want Failed (ratio 1), 4, 2, 2",
			job.Status.Phase, job.Status.Desired, job.Status.Succeeded, job.Status.Failed)
	}
	want := map[string]string{
		names[0]: "the node was deleted during the run",
		names[2]: "the node was deleted before its pod was created",
	}
	for _, f := range job.Status.FailedNodes {
		t.Logf("failed node %s: %s: %s", f.Node, f.Reason, f.Message)
		if f.Reason != "NodeDeleted" || want[f.Node] != f.Message {
			t.Errorf("failed node %+v, want NodeDeleted: %q", f, want[f.Node])
		}
		delete(want, f.Node)
	}
	if len(want) > 0 {
		t.Errorf("not in failedNodes: %v", want)
	}
	if _, ok := s.podUIDs[added]; ok {
		t.Errorf("the node added during the job got a pod")
	}
	nodes, err := jobdata.GetNodes(context.Background(), env.Client, s.ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range nodes.Targets {
		if target.Name == added {
			t.Errorf("the node added during the job is among its targets")
		}
	}
	if job.Status.Results == nil || job.Status.Results.Removed != s.writtenSum() {
		t.Errorf("results %+v, want removed %d", job.Status.Results, s.writtenSum())
	}
	bothFailed := func(evs []corev1.Event) bool {
		return findEvent(evs, "NodeFailed", names[0], "NodeDeleted") != nil && findEvent(evs, "NodeFailed", names[2], "NodeDeleted") != nil
	}
	evs := eventsUntil(t, "ImageJob", job.Name, time.Minute, bothFailed)
	if !bothFailed(evs) {
		t.Errorf("no NodeFailed Event for each deleted node:%s", describeEvents(evs))
	}
	t.Logf("ImageJob events:%s", describeEvents(evs))
}
