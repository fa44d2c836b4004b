package imagejob

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestJobLifecycle(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj(),
		builder.MakeNode("skip-me").Label(config.CleanupFilterLabel, "true").Obj(),
		builder.MakeNode("win").OS("windows").Obj())
	// The job's snapshot of the configuration carries the retention policy
	// to its pods.
	f.job("life", podspec.KindManual, baseConfig+"manager: {retention: {minAge: 1h}}\n", "alpine:3.19")

	f.reconcile("life")
	job := f.get("life")
	if job.Status.Phase != eraserv1.PhaseRunning || job.Status.Desired != 4 || job.Status.Skipped != 1 {
		t.Fatalf("after start: %+v", job.Status)
	}
	f.reconcile("life")
	pods := f.pods("life")
	var nodes []string
	for _, p := range pods {
		nodes = append(nodes, p.Spec.NodeName)
		if !metav1IsControlledBy(&p, job) {
			t.Errorf("pod %s is not controlled by the job", p.Name)
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "win"}, nodes); diff != "" {
		t.Fatalf("pods on nodes (-want +got):\n%s", diff)
	}
	// The real API server accepted the Windows node's HostProcess pod.
	if win := pods[2]; !win.Spec.HostNetwork || win.Spec.SecurityContext.WindowsOptions == nil || !*win.Spec.SecurityContext.WindowsOptions.HostProcess {
		t.Errorf("the Windows node's pod is not HostProcess: %+v", win.Spec)
	}
	if args := strings.Join(pods[0].Spec.Containers[0].Args, " "); !strings.Contains(args, "--imagelist=/run/eraser.sh/imagelist/images") ||
		!strings.Contains(args, "--min-age=1h0m0s") {
		t.Errorf("remover args %q", args)
	}

	// The retention outcomes and per-policy totals reach the status through
	// the real API server, so the CRD's schema takes them.
	retained := removed(2, 100)
	retained.Counts["too young"], retained.Counts["not needed"] = 4, 1
	retained.RemovedBy = map[string]workerresult.PolicyTotal{"Unused": {Images: 1, Bytes: 60}, "Listed": {Images: 1, Bytes: 40}}
	listed := removed(3, 50)
	listed.Counts["recently used"] = 2
	listed.RemovedBy = map[string]workerresult.PolicyTotal{"Listed": {Images: 3, Bytes: 50}}
	// The status's one figure of the space freed: a's measured gain, b's
	// expected bytes (its measurement failed), the Windows node's images'
	// sizes as the runtime reported them (no records read).
	retained.Freed = &workerresult.Freed{ExpectedBytes: 3 << 20, MeasuredBytes: 4 << 20, MeasuredBy: "imagefs"}
	listed.Freed = &workerresult.Freed{ExpectedBytes: 1 << 20, Error: "the image filesystem could not be read"}
	f.finishPod(&pods[0], corev1.PodSucceeded, retained)
	f.finishPod(&pods[1], corev1.PodSucceeded, listed)
	f.finishPod(&pods[2], corev1.PodSucceeded, removed(1, 10))
	f.reconcile("life")
	job = f.get("life")
	want := eraserv1.ImageJobStatus{Desired: 4, Succeeded: 3, Skipped: 1, Started: 3, Phase: eraserv1.PhaseCompleted,
		Results: &eraserv1.ImageResults{Removed: 6, InUse: 3, BytesFreed: 160, TooYoung: 4, RecentlyUsed: 2, NotNeeded: 1,
			ExpectedBytesFreed: 4 << 20, MeasuredBytesFreed: 4 << 20, Freed: "5.0MiB",
			Policies: []eraserv1.PolicyResult{
				{Policy: eraserv1.PolicyListed, Removed: 4, BytesFreed: 90},
				{Policy: eraserv1.PolicyUnused, Removed: 1, BytesFreed: 60},
			}}}
	got := eraserv1.ImageJobStatus{Desired: job.Status.Desired, Succeeded: job.Status.Succeeded, Failed: job.Status.Failed,
		Skipped: job.Status.Skipped, Started: job.Status.Started, Phase: job.Status.Phase, Results: job.Status.Results}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("final status (-want +got):\n%s", diff)
	}
	c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady)
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "3 of 3 nodes succeeded") {
		t.Errorf("Ready condition %+v", c)
	}
	if job.Status.DeleteAfter == nil || job.Status.CompletionTime == nil {
		t.Fatal("no deleteAfter/completionTime")
	}

	rep := job.Status.Report
	if rep == nil || rep.DeleteAfter == nil || rep.Namespace != f.ns || rep.Selector != "eraser.sh/report=life" ||
		!rep.DeleteAfter.Equal(&metav1.Time{Time: job.Status.CompletionTime.Add(24 * time.Hour)}) {
		t.Fatalf("status.report %+v: want the job kept keepReportFor (24h by default) after it finished", rep)
	}

	// delayOnSuccess is 0, but the pods' logs are the report's source: they
	// stay until the report is complete.
	f.reconcile("life")
	if n := len(f.pods("life")); n != 3 {
		t.Errorf("%d pods left before the report is complete, want 3", n)
	}
	// The report's collector (package reportwriter) writes a shard and marks
	// the report complete.
	shard := nodereport.ConfigMap(job, f.ns, 0, nodereport.Shard{Nodes: []string{"a"}, Data: []byte("x")})
	if err := env.Client.Create(f.ctx, shard); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(job.DeepCopy())
	job.Status.Report.Complete = true
	if err := env.Client.Status().Patch(f.ctx, job, patch); err != nil {
		t.Fatal(err)
	}
	f.reconcile("life")
	if n := len(f.pods("life")); n != 0 {
		t.Errorf("%d pods left", n)
	}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "life"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the job's data left with its pods gone: %v", err)
	}
	// The job, its report and its node list (which the report names
	// every node of) outlive the pods by keepReportFor...
	f.get("life")
	for _, cm := range []client.ObjectKey{client.ObjectKeyFromObject(shard), {Namespace: f.ns, Name: jobdata.NodesName("life")}} {
		if err := env.Client.Get(f.ctx, cm, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap %s gone with the pods: %v", cm.Name, err)
		}
	}
	// ...and then go together.
	f.clock.Step(24 * time.Hour)
	f.reconcile("life")
	if err := env.Client.Get(f.ctx, client.ObjectKey{Name: "life"}, job); !apierrors.IsNotFound(err) {
		t.Errorf("job not deleted: %v", err)
	}
	for _, cm := range []client.ObjectKey{client.ObjectKeyFromObject(shard), {Namespace: f.ns, Name: jobdata.NodesName("life")}} {
		if err := env.Client.Get(f.ctx, cm, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s left after the job: %v", cm.Name, err)
		}
	}
}

// TestWaves: never more pods at once than maxConcurrentNodes.
func TestWaves(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(10, "w")
	f.job("waves", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 3}}", "*")
	f.reconcile("waves")
	for step := 0; step < 20; step++ {
		f.reconcile("waves")
		active := 0
		pods := f.pods("waves")
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodPending {
				active++
			}
		}
		if active > 3 {
			t.Fatalf("step %d: %d pods active, limit 3", step, active)
		}
		if job := f.get("waves"); job.Status.Phase == eraserv1.PhaseCompleted {
			if job.Status.Succeeded != 10 || len(pods) != 10 {
				t.Fatalf("completed with %d succeeded, %d pods", job.Status.Succeeded, len(pods))
			}
			return
		}
		// Finish one pod per step.
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodPending {
				f.finishPod(&pods[i], corev1.PodSucceeded, removed(1, 1))
				break
			}
		}
	}
	t.Fatal("the job never completed")
}

// TestStuckPodTimesOut: a pod that never starts fails its node, is deleted,
// and the job still ends.
func TestStuckPodTimesOut(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("ok").Obj(), builder.MakeNode("stuck").Obj())
	f.job("stuck", podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m, cleanup: {delayOnFailure: 1h}}}", "*")
	f.reconcile("stuck")
	res := f.reconcile("stuck")
	// The deadline is the pod's creation on the manager's clock (wave/sight.go)
	// plus the timeout.
	if res.RequeueAfter < 2*time.Minute-3*time.Second || res.RequeueAfter > 2*time.Minute+3*time.Second {
		t.Errorf("requeue after %v, want the start timeout", res.RequeueAfter)
	}
	for _, p := range f.pods("stuck") {
		if p.Spec.NodeName == "ok" {
			f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
		} else {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "remover", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
			if err := env.Client.Status().Update(f.ctx, &p); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.reconcile("stuck")
	if job := f.get("stuck"); job.Status.Phase != eraserv1.PhaseRunning {
		t.Fatalf("finished before the timeout: %+v", job.Status)
	}
	f.clock.Step(3 * time.Minute)
	f.reconcile("stuck")
	job := f.get("stuck")
	if job.Status.Phase != eraserv1.PhaseFailed || job.Status.Failed != 1 || job.Status.Succeeded != 1 {
		t.Fatalf("after the timeout: %+v", job.Status)
	}
	want := []eraserv1.NodeFailure{{Node: "stuck", Reason: eraserv1.ReasonStartTimeout, Message: "did not start within 2m0s (remover: ImagePullBackOff)"}}
	if diff := cmp.Diff(want, job.Status.FailedNodes); diff != "" {
		t.Errorf("failed nodes (-want +got):\n%s", diff)
	}
	for _, p := range f.pods("stuck") {
		if p.Spec.NodeName == "stuck" && p.DeletionTimestamp == nil {
			t.Error("the timed-out pod was not deleted")
		}
	}
	// delayOnFailure keeps the failed job for inspection.
	f.reconcile("stuck")
	f.get("stuck")
	f.clock.Step(2 * time.Hour)
	f.reconcile("stuck")
	f.get("stuck")
	// The report is kept keepReportFor (24h) after the job finished.
	f.clock.Step(23 * time.Hour)
	f.reconcile("stuck")
	if err := env.Client.Get(f.ctx, client.ObjectKey{Name: "stuck"}, job); !apierrors.IsNotFound(err) {
		t.Errorf("job not deleted after keepReportFor: %v", err)
	}
}

// TestSuccessRatio: 1 failure in 100 nodes with successRatio 0.9 completes;
// upstream's integer division failed the job (#1163).
func TestSuccessRatio(t *testing.T) {
	cases := map[string]struct {
		ratio string
		want  eraserv1.JobPhase
	}{
		"0.9 tolerates one failure": {ratio: "0.9", want: eraserv1.PhaseCompleted},
		"1.0 does not":              {ratio: "1.0", want: eraserv1.PhaseFailed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.manyNodes(100, "r")
			f.job("ratio", podspec.KindManual, baseConfig+"manager: {imageJob: {successRatio: "+tc.ratio+"}}", "*")
			f.reconcile("ratio")
			f.reconcile("ratio")
			pods := f.pods("ratio")
			if len(pods) != 100 {
				t.Fatalf("%d pods, want 100 (no wave limit)", len(pods))
			}
			for i := range pods {
				phase := corev1.PodSucceeded
				if i == 42 {
					phase = corev1.PodFailed
				}
				f.finishPod(&pods[i], phase, removed(1, 1))
			}
			f.reconcile("ratio")
			job := f.get("ratio")
			if job.Status.Phase != tc.want || job.Status.Succeeded != 99 || job.Status.Failed != 1 {
				t.Fatalf("status %+v", job.Status)
			}
			if len(job.Status.FailedNodes) != 1 || job.Status.FailedNodes[0].Reason != eraserv1.ReasonPodFailed {
				t.Errorf("failed nodes %+v", job.Status.FailedNodes)
			}
		})
	}
}

func TestNodeDeletedMidRun(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("stays").Obj(), builder.MakeNode("goes").Obj())
	f.job("del", podspec.KindManual, baseConfig+"manager: {imageJob: {successRatio: 0.5}}", "*")
	f.reconcile("del")
	f.reconcile("del")
	for _, p := range f.pods("del") {
		if p.Spec.NodeName == "stays" {
			f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
		} else {
			f.runPod(&p)
		}
	}
	if err := env.Client.Delete(f.ctx, builder.MakeNode("goes").Obj()); err != nil {
		t.Fatal(err)
	}
	f.reconcile("del")
	job := f.get("del")
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Failed != 1 {
		t.Fatalf("status %+v", job.Status)
	}
	if job.Status.FailedNodes[0].Reason != eraserv1.ReasonNodeDeleted {
		t.Errorf("failed nodes %+v", job.Status.FailedNodes)
	}
}

// TestRestartMidJob: a new reconciler (a restarted manager, with no memory)
// carries the job on with the same pods.
func TestRestartMidJob(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(6, "rs")
	f.job("restart", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 2}}", "*")
	f.reconcile("restart")
	f.reconcile("restart")
	first := f.pods("restart")
	f.finishPod(&first[0], corev1.PodSucceeded, removed(1, 1))

	f.r = f.newReconciler()
	var job *eraserv1.ImageJob
	for range 10 {
		f.reconcile("restart")
		if job = f.get("restart"); job.Status.Phase != eraserv1.PhaseRunning {
			break
		}
		for _, p := range f.pods("restart") {
			if p.Status.Phase == corev1.PodPending {
				f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
			}
		}
	}
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 6 {
		t.Fatalf("status %+v", job.Status)
	}
	if n := len(f.pods("restart")); n != 6 {
		t.Errorf("%d pods for 6 nodes", n)
	}
}

// TestConfigSnapshot: pods of a running job keep the configuration the job
// started with, whatever the config store says now; a running container
// that already failed ends its node.
func TestFailedContainerInRunningPod(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("oom").Obj())
	f.job("oom", podspec.KindManual, baseConfig, "*")
	f.reconcile("oom")
	f.reconcile("oom")
	p := f.pods("oom")[0]
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "remover", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
	if err := env.Client.Status().Update(f.ctx, &p); err != nil {
		t.Fatal(err)
	}
	f.reconcile("oom")
	job := f.get("oom")
	if job.Status.Phase != eraserv1.PhaseFailed || !strings.Contains(job.Status.FailedNodes[0].Message, "OOMKilled") {
		t.Fatalf("status %+v", job.Status)
	}
}

// TestImageListJobWaitsForRecording: a finished job of an ImageList is not
// deleted before the ImageList has recorded its results.
func TestImageListJobWaitsForRecording(t *testing.T) {
	f := newFixture(t)
	job := builder.MakeImageJob("owned").Labels(eraserv1.LabelJobOwner, eraserv1.JobOwnerImageList).Obj()
	if err := env.Client.Create(f.ctx, job); err != nil {
		t.Fatal(err)
	}
	doc := baseConfig + "manager: {imageJob: {cleanup: {keepReportFor: 0s}}}\n"
	if err := jobdata.Create(f.ctx, env.Client, f.ns, job, jobdata.Data{Kind: podspec.KindManual, Images: []string{"*"}, Raw: []byte(doc)}); err != nil {
		t.Fatal(err)
	}
	f.reconcile("owned") // no nodes: finishes at once
	f.reconcile("owned")
	job = f.get("owned")
	if job.Status.Phase != eraserv1.PhaseCompleted {
		t.Fatalf("status %+v", job.Status)
	}
	f.reconcile("owned")
	job = f.get("owned")
	job.Annotations = map[string]string{eraserv1.AnnotationRecorded: "true"}
	if err := env.Client.Update(f.ctx, job); err != nil {
		t.Fatal(err)
	}
	// No collector marks this report complete: the pods wait for it at most
	// reportWait.
	f.clock.Step(reportWait)
	f.reconcile("owned")
	if err := env.Client.Get(f.ctx, client.ObjectKey{Name: "owned"}, job); !apierrors.IsNotFound(err) {
		t.Errorf("recorded job not deleted: %v", err)
	}
}
