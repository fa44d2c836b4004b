package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// TestSkewedManagerClock: the manager's clock 10 minutes ahead of the API
// server's and the kubelet's (which the test's wall clock plays), then 10
// minutes behind. No node times out early, a pod stuck pending and one
// stuck running still time out, and a restart in between only delays them.
func TestSkewedManagerClock(t *testing.T) {
	for name, offset := range map[string]time.Duration{"ahead": 10 * time.Minute, "behind": -10 * time.Minute} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.clock.SetTime(time.Now().Add(offset))
			begin := f.clock.Now()
			node := func(s string) string { return "skew-" + name + "-" + s }
			f.nodes(builder.MakeNode(node("ok")).Obj(), builder.MakeNode(node("pending")).Obj(), builder.MakeNode(node("running")).Obj())
			f.job(name, podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m, podRunTimeout: 5m}}", "*")
			f.reconcile(name)
			f.reconcile(name)
			// The kubelet's timestamps are its own clock's: the API server's.
			started := metav1.Now()
			for _, p := range f.pods(name) {
				if p.Spec.NodeName == node("pending") {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
				} else {
					p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &started
				}
				if err := env.Client.Status().Update(f.ctx, &p); err != nil {
					t.Fatal(err)
				}
			}
			failed := func(want map[string]string) {
				t.Helper()
				f.reconcile(name)
				got := map[string]string{}
				for _, nf := range f.get(name).Status.FailedNodes {
					got[nf.Node] = nf.Reason
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("failed nodes %v into the job (-want +got):\n%s", f.clock.Now().Sub(begin).Round(time.Second), diff)
				}
			}
			failed(map[string]string{})
			f.clock.Step(time.Minute)
			failed(map[string]string{})
			// A new leader counts from its first sight of each pod.
			f.r = f.newReconciler()
			failed(map[string]string{})
			f.clock.Step(90 * time.Second)
			failed(map[string]string{})
			for _, p := range f.pods(name) {
				if p.Spec.NodeName == node("ok") {
					f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
				}
			}
			f.clock.Step(40 * time.Second)
			failed(map[string]string{node("pending"): eraserv1.ReasonStartTimeout})
			f.clock.Step(3 * time.Minute)
			failed(map[string]string{node("pending"): eraserv1.ReasonStartTimeout, node("running"): eraserv1.ReasonRunTimeout})
			if job := f.get(name); job.Status.Phase != eraserv1.PhaseFailed || job.Status.Succeeded != 1 {
				t.Errorf("job %+v, want Failed with one node succeeded", job.Status)
			}
		})
	}
}
