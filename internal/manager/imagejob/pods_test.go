package imagejob

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestRefusedAll(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	forbidden := apierrors.NewForbidden(gr, "p", errors.New(`violates PodSecurity "baseline:latest": hostPath volumes`))
	cases := map[string]struct {
		errs []error
		want bool
	}{
		"none sent":               {errs: nil},
		"all forbidden":           {errs: []error{forbidden, forbidden}, want: true},
		"one created":             {errs: []error{forbidden, nil}},
		"a transient error":       {errs: []error{forbidden, apierrors.NewServiceUnavailable("busy")}},
		"invalid (PriorityClass)": {errs: []error{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, got := refusedAll(tc.errs); got != tc.want {
				t.Errorf("refusedAll = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAPIMessageOmitsThePod: one refusal of many pods reads as one.
func TestAPIMessageOmitsThePod(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	a := apiMessage(apierrors.NewForbidden(gr, "job-node-a-12345678", errors.New("exceeded quota: q")))
	b := apiMessage(apierrors.NewForbidden(gr, "job-node-b-87654321", errors.New("exceeded quota: q")))
	if a != b || strings.Contains(a, "node-a") || !strings.Contains(a, "exceeded quota") {
		t.Errorf("messages %q and %q", a, b)
	}
}

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
	if c == nil || c.Reason != eraserv1.ReasonPodsRefused || !strings.Contains(c.Message, "PodSecurity") || !strings.Contains(c.Message, "hostPath") {
		t.Errorf("Ready condition %+v, want %s naming Pod Security and the hostPath volume", c, eraserv1.ReasonPodsRefused)
	}
	if n := len(f.pods("psa")); n != 0 {
		t.Errorf("%d pods", n)
	}
	f.expectEvent(eraserv1.ReasonPodsRefused)
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
	f.expectEvent(eraserv1.ReasonCreateFailed)
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
		if fn.Reason != eraserv1.ReasonCreateFailed || !strings.Contains(fn.Message, "exceeded quota") {
			t.Errorf("failed node %+v, want %s with the quota's message", fn, eraserv1.ReasonCreateFailed)
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

// TestNodeSelectorAndTolerations: manager.imageJob.nodeSelector and
// tolerations (ours) pick the nodes, the pods carry exactly the configured
// tolerations, and the Ready condition names why each node was skipped,
// pass after pass (the reasons are read back from the job's node list).
func TestNodeSelectorAndTolerations(t *testing.T) {
	f := newFixture(t)
	f.nodes(
		builder.MakeNode("gpu").Label("pool", "gpu").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(),
		builder.MakeNode("gpu-cp").Label("pool", "gpu").Taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule).Obj(),
		builder.MakeNode("cpu").Label("pool", "cpu").Obj(),
	)
	// The API server taints every new node not-ready (TaintNodesByCondition);
	// play the node lifecycle controller, which lifts it once the node is up.
	for _, name := range []string{"gpu", "gpu-cp", "cpu"} {
		n := &corev1.Node{}
		if err := env.Client.Get(f.ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		if err := env.Client.Update(f.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	f.job("taints", podspec.KindManual, baseConfig+"manager: {imageJob: {nodeSelector: {pool: gpu}, tolerations: [{key: dedicated, operator: Exists}]}}", "nginx")
	const skipped = "skipped: 1 NodeSelector (pool=gpu), 1 Tainted (node-role.kubernetes.io/control-plane:NoSchedule)"
	for pass := range 2 {
		f.reconcile("taints")
		job := f.get("taints")
		if job.Status.Phase != eraserv1.PhaseRunning || job.Status.Desired != 3 || job.Status.Skipped != 2 {
			t.Fatalf("pass %d: status %+v", pass, job.Status)
		}
		if c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady); c == nil || !strings.HasSuffix(c.Message, skipped) {
			t.Errorf("pass %d: Ready condition %+v, want its message to end with %q", pass, c, skipped)
		}
	}
	pods := f.pods("taints")
	if len(pods) != 1 || pods[0].Spec.NodeName != "gpu" {
		t.Fatalf("%d pods, want one on node gpu", len(pods))
	}
	// The API server accepted them, adding only its DefaultTolerationSeconds
	// (not-ready and unreachable NoExecute, for 300s): no tolerate-all.
	got := slices.DeleteFunc(pods[0].Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable)
	})
	want := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	f.finishPod(&pods[0], corev1.PodSucceeded, removed(1, 1))
	f.reconcile("taints")
	if job := f.get("taints"); job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 1 {
		t.Errorf("status %+v, want Completed on the one eligible node", job.Status)
	}
}

// TestAPIServerChecksWindowsPods: the real API server accepts the HostProcess
// pod the builder emits, and refuses it once broken (no host network).
func TestAPIServerChecksWindowsPods(t *testing.T) {
	f := newFixture(t)
	cfg, _, err := config.Parse([]byte(baseConfig))
	if err != nil {
		t.Fatal(err)
	}
	build := func(name string) *corev1.Pod {
		pod, err := podspec.Build(podspec.Params{Job: name, JobUID: "uid", Kind: podspec.KindManual, Node: "win", OS: podpaths.Windows,
			Namespace: f.ns, Config: cfg, ConfigMap: name, LogLevel: "info", References: []string{name + "-refs"}, NodeReferences: references.EncodeNode(nil)})
		if err != nil {
			t.Fatal(err)
		}
		pod.OwnerReferences = nil
		return pod
	}
	if err := env.Client.Create(f.ctx, build("good")); err != nil {
		t.Fatalf("the emitted HostProcess pod was refused: %v", err)
	}
	broken := build("broken")
	broken.Spec.HostNetwork = false
	err = env.Client.Create(f.ctx, broken)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "hostNetwork") {
		t.Errorf("a HostProcess pod without host network: %v, want Invalid naming hostNetwork", err)
	}
}

// TestScannerFailureIsNamed: when the scanner could not run (no
// vulnerability DB, say) the node's failure names the scanner and its
// error, not the remover that correctly removed nothing.
func TestScannerFailureIsNamed(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("scan").Obj())
	f.job("scan", podspec.KindCollector, baseConfig+"components: {collector: {enabled: true}, scanner: {enabled: true}}\n")
	f.reconcile("scan")
	f.reconcile("scan")
	p := f.pods("scan")[0]
	if n := len(p.Spec.Containers); n != 3 {
		t.Fatalf("%d containers, want collector, remover and scanner", n)
	}
	scanner := workerresult.Summary{Component: "trivy-scanner", Error: "no usable vulnerability DB in /var/lib/trivy/db"}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: podspec.RemoverContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: "Completed", Message: string((&workerresult.Summary{Component: "remover", Counts: map[string]int{}}).Encode())}}},
		{Name: podspec.ScannerContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", Message: string(scanner.Encode())}}},
	}
	if err := env.Client.Status().Update(f.ctx, &p); err != nil {
		t.Fatal(err)
	}
	f.reconcile("scan")
	job := f.get("scan")
	if job.Status.Phase != eraserv1.PhaseFailed || len(job.Status.FailedNodes) != 1 {
		t.Fatalf("status %+v", job.Status)
	}
	if got, want := job.Status.FailedNodes[0].Message, "container trivy-scanner: no usable vulnerability DB"; !strings.Contains(got, want) {
		t.Errorf("failure message %q, want it to contain %q", got, want)
	}
}

// TestRetentionPods: a scheduled job's pods carry the retention policy of
// the job's configuration, and the real API server takes their host
// directories.
func TestRetentionPods(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("r").Obj())
	f.job("ret", podspec.KindCollector, baseConfig+`manager:
  retention: {minAge: 2h, unusedFor: 168h, highThresholdPercent: 85, lowThresholdPercent: 75, imageFsPath: /mnt/images}
components: {collector: {enabled: true}}
`)
	f.reconcile("ret")
	f.reconcile("ret")
	pods := f.pods("ret")
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	want := "--min-age=2h0m0s --unused-for=168h0m0s --high-threshold-percent=85 --low-threshold-percent=75 --imagefs-path=/mnt/images"
	for _, c := range pods[0].Spec.Containers {
		if args := strings.Join(c.Args, " "); !strings.Contains(args, want) {
			t.Errorf("%s args %q, want them to contain %q", c.Name, args, want)
		}
	}
	var hostPaths []string
	for _, v := range pods[0].Spec.Volumes {
		if v.HostPath != nil {
			hostPaths = append(hostPaths, v.HostPath.Path)
		}
	}
	if diff := cmp.Diff([]string{"/run/containerd/containerd.sock", "/var/lib/eraser", "/mnt/images"}, hostPaths); diff != "" {
		t.Errorf("hostPath volumes (-want +got):\n%s", diff)
	}
}
