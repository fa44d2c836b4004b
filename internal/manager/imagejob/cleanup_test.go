package imagejob

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// A finished job waits for its owner to record it before cleanup, unless
// no owner is left to: an ImageList's job orphaned by --cascade=orphan.
func TestWaitsForRecording(t *testing.T) {
	listJob := func() *builder.ImageJobWrapper {
		return builder.MakeImageJob("j").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerImageList)
	}
	cases := map[string]struct {
		job  *eraserv1.ImageJob
		want bool
	}{
		"ImageList's, unrecorded":     {job: listJob().ControlledBy("l", "uid-1").Obj(), want: true},
		"ImageList's, recorded":       {job: listJob().ControlledBy("l", "uid-1").Annotation(eraserv1.AnnotationRecorded, "true").Obj()},
		"ImageList's, orphaned":       {job: listJob().Obj()},
		"scheduled, unrecorded":       {job: builder.MakeImageJob("s").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Obj(), want: true},
		"scheduled, recorded":         {job: builder.MakeImageJob("s").Label(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Annotation(eraserv1.AnnotationRecorded, "true").Obj()},
		"created by hand, no manager": {job: builder.MakeImageJob("h").Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := waitsForRecording(tc.job); got != tc.want {
				t.Errorf("waitsForRecording = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPodsWaitForTheReportAcrossARestart: a manager that
// was down across a job's end (longer than reportWait) does not delete the
// pods at once when it comes back: the report's collector gets its time,
// counted from this process's first sight of the finished job. The job's
// node list outlives the pods.
func TestPodsWaitForTheReportAcrossARestart(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj())
	f.job("down", podspec.KindManual, baseConfig, "*")
	f.reconcile("down")
	f.reconcile("down")
	pods := f.pods("down")
	for i := range pods {
		f.finishPod(&pods[i], corev1.PodSucceeded, removed(1, 10))
	}
	f.reconcile("down")
	if job := f.get("down"); job.Status.Phase != eraserv1.PhaseCompleted {
		t.Fatalf("status %+v", job.Status)
	}
	// The manager is down for twice reportWait; a new one starts.
	f.clock.Step(2 * reportWait)
	f.r = f.newReconciler()
	f.reconcile("down")
	if n := len(f.pods("down")); n != 2 {
		t.Fatalf("%d pods left right after the restart, want 2: the report has not been read", n)
	}
	f.clock.Step(reportWait)
	f.reconcile("down")
	if n := len(f.pods("down")); n != 0 {
		t.Errorf("%d pods left reportWait after the restart", n)
	}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: jobdata.NodesName("down")}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("the node list went with the pods: %v", err)
	}
}
