package imagejob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestConsecutiveFailedRunsCountFinishedPods: eraser_node_consecutive_failed_runs
// counts every failed outcome of a node's worker, a pod that failed
// (PodFailed) or whose removals failed (RemovalsFailed) included, and goes
// back to 0 with the node's next success.
func TestConsecutiveFailedRunsCountFinishedPods(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	f.r = NewReconciler(f.cached, env.Client, f.stores, f.rec, f.clock, m, Options{Namespace: f.ns, LogLevel: "info", References: &f.refs})
	f.nodes(builder.MakeNode("ok").Obj(), builder.MakeNode("failed").Obj(), builder.MakeNode("removals").Obj())

	// run is one job in which each node's pod ends as ends says.
	run := func(name string, ends map[string]func(*corev1.Pod)) {
		t.Helper()
		f.job(name, podspec.KindManual, baseConfig, "alpine:3.19")
		f.reconcile(name)
		for _, pod := range f.pods(name) {
			ends[pod.Spec.NodeName](&pod)
		}
		f.reconcile(name)
		if job := f.get(name); job.Status.CompletionTime == nil {
			t.Fatalf("job %s did not finish: %+v", name, job.Status)
		}
	}
	succeed := func(pod *corev1.Pod) { f.finishPod(pod, corev1.PodSucceeded, removed(1, 10)) }
	fail := func(pod *corev1.Pod) { f.finishPod(pod, corev1.PodFailed, nil) }
	removalsFail := func(pod *corev1.Pod) {
		f.finishPod(pod, corev1.PodFailed, removed(0, 0))
		pod.Status.ContainerStatuses[0].State.Terminated.ExitCode = workerresult.ExitNodeFailed
		if err := env.Client.Status().Update(f.ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	run("first", map[string]func(*corev1.Pod){"ok": succeed, "failed": fail, "removals": removalsFail})
	reasons := map[string]string{}
	for _, nf := range f.get("first").Status.FailedNodes {
		reasons[nf.Node] = nf.Reason
	}
	if diff := cmp.Diff(map[string]string{"failed": eraserv1.ReasonPodFailed, "removals": eraserv1.ReasonRemovalsFailed}, reasons); diff != "" {
		t.Errorf("the first job's failed nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"ok": 0, "failed": 1, "removals": 1}, failedRuns(t, reg)); diff != "" {
		t.Errorf("after the first job (-want +got):\n%s", diff)
	}
	run("second", map[string]func(*corev1.Pod){"ok": fail, "failed": succeed, "removals": removalsFail})
	if diff := cmp.Diff(map[string]float64{"ok": 1, "failed": 0, "removals": 2}, failedRuns(t, reg)); diff != "" {
		t.Errorf("after the second job (-want +got):\n%s", diff)
	}
}

// failedRuns reads eraser_node_consecutive_failed_runs by node.
func failedRuns(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, fam := range families {
		if fam.GetName() != "eraser_node_consecutive_failed_runs" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node_name" {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return got
}
