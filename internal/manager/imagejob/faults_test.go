package imagejob

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// TestEveryPodRefused: Pod Security "baseline" enforced on the namespace
// refuses every worker pod (they mount the runtime socket). The job fails at
// once with the API server's reason, instead of retrying for ever.
func TestEveryPodRefused(t *testing.T) {
	f := newFixture(t)
	ns := &corev1.Namespace{}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Name: f.ns}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if err := env.Client.Update(f.ctx, ns); err != nil {
		t.Fatal(err)
	}
	f.manyNodes(3, "psa")
	f.job("psa", podspec.KindManual, baseConfig, "*")
	f.reconcile("psa")
	job := f.get("psa")
	if job.Status.Phase != eraserv1.PhaseFailed {
		t.Fatalf("phase %q after the first pass, want Failed; status %+v", job.Status.Phase, job.Status)
	}
	c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady)
	if c == nil || c.Reason != ReasonPodsRefused || !strings.Contains(c.Message, "PodSecurity") || !strings.Contains(c.Message, "hostPath") {
		t.Errorf("Ready condition %+v, want %s naming Pod Security and the hostPath volume", c, ReasonPodsRefused)
	}
	if n := len(f.pods("psa")); n != 0 {
		t.Errorf("%d pods", n)
	}
	f.expectEvent(ReasonPodsRefused)
}

// TestQuotaRefusesSome: a quota admits one worker pod of three. The others
// are retried with backoff (not every pass) until the start timeout, then
// fail with the quota's message, and the job ends.
func TestQuotaRefusesSome(t *testing.T) {
	f := newFixture(t)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "one-pod"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
	if err := env.Client.Create(f.ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No quota controller runs here: publish the usage it would have.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := env.Client.Status().Update(f.ctx, quota); err != nil {
		t.Fatal(err)
	}
	f.manyNodes(3, "q")
	f.job("quota", podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m, successRatio: 0.3}}", "*")
	f.reconcile("quota")
	res := f.reconcile("quota")
	if n := len(f.pods("quota")); n != 1 {
		t.Fatalf("%d pods, want the one the quota admits", n)
	}
	if job := f.get("quota"); job.Status.Phase != eraserv1.PhaseRunning {
		t.Fatalf("phase %q, want Running while the refused nodes are retried", job.Status.Phase)
	}
	if res.RequeueAfter < time.Second || res.RequeueAfter > 2*time.Second {
		t.Errorf("requeue after %v, want the first backoff (1-2s)", res.RequeueAfter)
	}
	f.expectEvent(wave.ReasonCreateFailed)
	pod := f.pods("quota")[0]
	f.finishPod(&pod, corev1.PodSucceeded, removed(1, 1))
	// The quota still counts the finished pod: the others stay refused.
	f.clock.Step(3 * time.Minute)
	f.reconcile("quota")
	job := f.get("quota")
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 1 || job.Status.Failed != 2 {
		t.Fatalf("status %+v, want Completed (ratio 0.3) with 2 failed nodes", job.Status)
	}
	for _, fn := range job.Status.FailedNodes {
		if fn.Reason != wave.ReasonCreateFailed || !strings.Contains(fn.Message, "exceeded quota") {
			t.Errorf("failed node %+v, want %s with the quota's message", fn, wave.ReasonCreateFailed)
		}
	}
}

// expectEvent waits for an Event with the reason on the fake recorder.
func (f *fixture) expectEvent(reason string) {
	f.t.Helper()
	for {
		select {
		case e := <-f.rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				return
			}
		default:
			f.t.Errorf("no %s Event", reason)
			return
		}
	}
}

// TestExclusionListAddedMidJob: an exclusion list created while a rolling
// job runs is mounted into the pods of the nodes not reached yet.
func TestExclusionListAddedMidJob(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(2, "ex")
	f.job("excl", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 1}}", "*")
	f.reconcile("excl")
	first := f.pods("excl")
	if len(first) != 1 || mountsList(&first[0], "late-list") {
		t.Fatalf("first wave: %d pods", len(first))
	}
	list := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "late-list", Labels: map[string]string{jobdata.LabelExclusionList: "true"}},
		Data: map[string]string{"list.json": `{"excluded":["docker.io/library/*"]}`}}
	if err := env.Client.Create(f.ctx, list); err != nil {
		t.Fatal(err)
	}
	f.finishPod(&first[0], corev1.PodSucceeded, removed(1, 1))
	f.reconcile("excl")
	for _, p := range f.pods("excl") {
		if p.Name != first[0].Name && !mountsList(&p, "late-list") {
			t.Errorf("pod %s of the second wave does not mount the list created during the job", p.Name)
		}
	}
}

func mountsList(pod *corev1.Pod, cm string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm {
			return true
		}
	}
	return false
}

// TestFailuresAnnouncedOnce: failures beyond the 32 the status names are
// counted every pass but announced once, in one Event per pass, not re-read
// and re-announced.
func TestFailuresAnnouncedOnce(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(40, "fo")
	f.job("once", podspec.KindManual, baseConfig+"manager: {imageJob: {cleanup: {delayOnFailure: 1h}}}", "*")
	f.reconcile("once")
	pods := f.pods("once")
	for i := range pods[:39] {
		f.finishPod(&pods[i], corev1.PodFailed, nil)
	}
	for range 3 {
		f.reconcile("once")
	}
	job := f.get("once")
	if job.Status.Failed != 39 || job.Status.Phase != eraserv1.PhaseRunning || len(job.Status.FailedNodes) != eraserv1.MaxReportedNodes {
		t.Fatalf("status: failed %d, phase %s, %d named", job.Status.Failed, job.Status.Phase, len(job.Status.FailedNodes))
	}
	var events []string
	for len(f.rec.Events) > 0 {
		if e := <-f.rec.Events; strings.Contains(e, " NodeFailed ") {
			events = append(events, e)
		}
	}
	if len(events) != 1 || !strings.Contains(events[0], "39 node(s) failed") || !strings.Contains(events[0], "and 34 more") {
		t.Errorf("NodeFailed Events %q, want one naming the 39 failures", events)
	}
}
