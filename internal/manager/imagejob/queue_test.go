package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// busyNodes counts, per node, the unfinished worker pods of every job.
func (f *fixture) busyNodes() map[string]int {
	f.t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(f.ctx, &pods, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if !podspec.Finished(&p) {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

func (f *fixture) oneWorkerPerNode() {
	f.t.Helper()
	for node, n := range f.busyNodes() {
		if n > 1 {
			f.t.Fatalf("node %s holds %d unfinished worker pods", node, n)
		}
	}
}

// TestOneWorkerPerNode: a scheduled run holds three nodes; an ImageList's
// run reaches them and waits, each node taking it as soon as its own worker
// ended, across a manager restart; the list's run is visible as queued.
func TestOneWorkerPerNode(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj(), builder.MakeNode("c").Obj())
	f.job("sched", podspec.KindCollector, baseConfig)
	f.reconcile("sched")
	f.reconcile("sched")
	if n := len(f.pods("sched")); n != 3 {
		t.Fatalf("the scheduled run has %d pods, want 3", n)
	}
	f.job("list", podspec.KindManual, baseConfig, "alpine:3.19")
	f.reconcile("list")
	f.reconcile("list")
	f.oneWorkerPerNode()
	job := f.get("list")
	got := struct {
		Pods, Started, Waiting int
		Indexes, Behind        string
	}{len(f.pods("list")), job.Status.Started, job.Status.Waiting, job.Status.WaitingIndexes, job.Status.QueuedBehind}
	if diff := cmp.Diff(struct {
		Pods, Started, Waiting int
		Indexes, Behind        string
	}{0, 3, 3, "0-2", "sched"}, got); diff != "" {
		t.Fatalf("the list's run (-want +got):\n%s", diff)
	}

	// b's scheduled worker ends: b takes the list's run, the others wait.
	sched := f.pods("sched")
	f.finishPod(&sched[1], corev1.PodSucceeded, nil)
	f.reconcile("list")
	f.oneWorkerPerNode()
	if pods := f.pods("list"); len(pods) != 1 || pods[0].Spec.NodeName != "b" {
		t.Fatalf("after b's worker ended the list has pods %v, want one on b", podNodes(pods))
	}
	if job := f.get("list"); job.Status.Waiting != 2 || job.Status.WaitingIndexes != "0,2" {
		t.Fatalf("waiting %d %q, want 2 \"0,2\"", job.Status.Waiting, job.Status.WaitingIndexes)
	}

	// A restarted manager knows the waiting nodes from the status.
	f.r = f.newReconciler()
	f.reconcile("list")
	f.oneWorkerPerNode()
	if n := len(f.pods("list")); n != 1 {
		t.Fatalf("after a restart the list has %d pods, want 1", n)
	}
	f.finishPod(&sched[0], corev1.PodSucceeded, nil)
	f.finishPod(&sched[2], corev1.PodSucceeded, nil)
	f.reconcile("list")
	f.oneWorkerPerNode()
	for _, p := range f.pods("list") {
		f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
	}
	f.reconcile("list")
	job = f.get("list")
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 3 || job.Status.Waiting != 0 || job.Status.QueuedBehind != "" {
		t.Fatalf("the list's run did not complete on every node: %+v", job.Status)
	}
}

// TestListGoesFirst: two runs wait for one node; when it frees, the
// ImageList's run takes it although the scheduled run came first.
func TestListGoesFirst(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj())
	f.job("first", podspec.KindManual, baseConfig, "x:1")
	f.reconcile("first")
	f.reconcile("first")
	f.job("sched", podspec.KindCollector, baseConfig)
	f.reconcile("sched")
	f.reconcile("sched")
	f.job("list", podspec.KindManual, baseConfig, "y:1")
	f.reconcile("list")
	f.reconcile("list")
	f.oneWorkerPerNode()
	pods := f.pods("first")
	f.finishPod(&pods[0], corev1.PodSucceeded, removed(1, 1))
	// The scheduled run passes first, yet the list queued for the node.
	f.reconcile("sched")
	f.reconcile("list")
	f.oneWorkerPerNode()
	if s, l := len(f.pods("sched")), len(f.pods("list")); s != 0 || l != 1 {
		t.Fatalf("after the node freed: scheduled run %d pods, list %d; want 0 and 1", s, l)
	}
	if b := f.get("sched").Status.QueuedBehind; b != "list" {
		t.Errorf("the scheduled run waits behind %q, want list", b)
	}
}

// TestMaxWorkerPods: two runs on three nodes with maxWorkerPods 2 never
// have more than two unfinished pods between them.
func TestMaxWorkerPods(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(3, "bound")
	doc := baseConfig + "manager: {imageJob: {maxWorkerPods: 2}}\n"
	f.job("one", podspec.KindManual, doc, "x:1")
	f.job("two", podspec.KindManual, doc, "y:1")
	inFlight := func() int {
		n := 0
		for _, c := range f.busyNodes() {
			n += c
		}
		return n
	}
	for range 12 {
		for _, j := range []string{"one", "two"} {
			f.reconcile(j)
			if n := inFlight(); n > 2 {
				t.Fatalf("%d worker pods in flight, the bound is 2", n)
			}
			f.oneWorkerPerNode()
		}
		for _, j := range []string{"one", "two"} {
			for _, p := range f.pods(j) {
				if !podspec.Finished(&p) {
					f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
					break
				}
			}
		}
	}
	for _, j := range []string{"one", "two"} {
		if job := f.get(j); job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 3 {
			t.Errorf("job %s: %+v", j, job.Status)
		}
	}
}

func podNodes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

type fakePods map[string][]*corev1.Pod

func (f fakePods) Busy() (int, error) { return len(f), nil }

func (f fakePods) BusyOn(node string) ([]*corev1.Pod, error) { return f[node], nil }

// TestWorkers: the queue sees each worker pod as its job and run, so that
// an earlier run of the same name still holds its node.
func TestWorkers(t *testing.T) {
	pods := fakePods{"a": {
		builder.MakePod("j-a", "a", time.Time{}).Run("j", "run-2").Obj(),
		builder.MakePod("j-a-old", "a", time.Time{}).Run("j", "run-1").Obj(),
		builder.MakePod("sched-a", "a", time.Time{}).Job("sched").Obj(),
	}}
	got, err := workers{pods}.BusyOn("a")
	if err != nil {
		t.Fatal(err)
	}
	want := []nodequeue.Worker{{Job: "j", Run: "run-2"}, {Job: "j", Run: "run-1"}, {Job: "sched"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BusyOn (-want +got):\n%s", diff)
	}
}
