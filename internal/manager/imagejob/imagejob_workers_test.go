package imagejob

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestMissingData(t *testing.T) {
	f := newFixture(t)
	job := builder.MakeImageJob("nodata").Obj()
	if err := env.Client.Create(f.ctx, job); err != nil {
		t.Fatal(err)
	}
	if res := f.reconcile("nodata"); res.RequeueAfter == 0 {
		t.Error("no requeue while the ConfigMap may still come")
	}
	f.clock.Step(2 * time.Minute)
	f.reconcile("nodata")
	job = f.get("nodata")
	if job.Status.Phase != eraserv1.PhaseFailed || meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady).Reason != "ConfigMissing" {
		t.Fatalf("status %+v", job.Status)
	}
}

// TestIncludeFilter: upstream's imagelist_include_nodes at the API level.
func TestIncludeFilter(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("in").Label("eraser-target", "yes").Obj(), builder.MakeNode("out").Obj())
	f.job("include", podspec.KindManual, baseConfig+"manager: {nodeFilter: {type: include, selectors: [eraser-target=yes]}}", "nginx")
	f.reconcile("include")
	pods := f.pods("include")
	if len(pods) != 1 || pods[0].Spec.NodeName != "in" {
		t.Fatalf("pods %v, want one on the included node", len(pods))
	}
	if job := f.get("include"); job.Status.Skipped != 1 || job.Status.Desired != 2 {
		t.Errorf("status %+v", job.Status)
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
