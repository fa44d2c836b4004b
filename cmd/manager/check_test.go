package main_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/releasecheck"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// runCheck runs `manager check`, as the chart's helm test pod does.
func runCheck(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, managertest.Binary.Path(t), append([]string{"check", "--namespace=" + ns, "--within=1m"}, args...)...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+env.KubeconfigPath)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("$ manager check (exit %d)\n%s", code, out.String())
	return out.String(), code
}

// TestReleaseCheck: `manager check` (helm test's) fails on a release whose
// manager is not ready, naming each part, without waiting for an answer
// that cannot come; with the manager running and ready, every check passes,
// its dry-run ImageList answered and deleted.
func TestReleaseCheck(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-check"
	ensureNamespace(t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 7}}\n"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: releasecheck.DeploymentName},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "eraser"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "eraser"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "eraser.invalid/manager:test"}}}},
		},
	}
	if err := env.Client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	out, code := runCheck(t, ns)
	for _, want := range []string{"ok     the CRDs serve every field", "FAILED the configuration is valid", "successRatio",
		"FAILED the manager is ready", "FAILED the manager answers a dry-run ImageList: not tried"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want 1 with %q", code, want)
		}
	}

	// Fixed, and the manager running (its Deployment says ready, as the
	// kubelet would).
	cm.Data[config.ConfigKey] = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	dep.Status = appsv1.DeploymentStatus{Replicas: 1, ReadyReplicas: 1}
	if err := env.Client.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	// The check deletes its list; no garbage collector runs here to take
	// the list's job, which later tests would count.
	t.Cleanup(func() {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(context.Background(), &jobs); err != nil {
			return
		}
		for i := range jobs.Items {
			if strings.HasPrefix(jobs.Items[i].Labels[eraserv1.LabelImageList], "eraser-release-check-") {
				_ = env.Client.Delete(context.Background(), &jobs.Items[i])
			}
		}
	})
	managerIn(ns).Start(t, cm.Data[config.ConfigKey])
	out, code = runCheck(t, ns)
	if code != 0 {
		t.Fatalf("manager check on a working release: exit %d", code)
	}
	if !strings.Contains(out, "ok     the manager answers a dry-run ImageList") {
		t.Errorf("no answer to the dry-run ImageList:\n%s", out)
	}
}

// TestReleaseCheckImages: with the release's image given (as the chart's
// helm test pod gives it), `manager check` fails on a manager and workers
// that a previous release's values hold at another version, naming each.
func TestReleaseCheckImages(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-check-images"
	ensureNamespace(t, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\ncomponents: {collector: {enabled: true, image: {repo: registry.example/eraser/collector, tag: 1.2.3}}}\n"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: releasecheck.DeploymentName},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "eraser"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "eraser"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: releasecheck.ManagerContainer, Image: "registry.example/eraser/eraser-manager:1.2.3"}}}},
		},
	}
	if err := env.Client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	// A Deployment running eraser-manager outside a manager's namespace is
	// another manager to every later test's.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), dep) })
	out, code := runCheck(t, ns, "--release-image=registry.example/eraser/eraser-manager:1.2.4")
	for _, want := range []string{"FAILED the manager and its workers run the release's images",
		"Deployment eraser-controller-manager runs registry.example/eraser/eraser-manager:1.2.3, not the release's registry.example/eraser/eraser-manager:1.2.4",
		"the collector's image is registry.example/eraser/collector:1.2.3, not at the release's tag 1.2.4"} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want 1 with %q", code, want)
		}
	}
}

// TestReleaseCheckMigration: `manager check` runs migrate check's checks:
// another Eraser manager acting on the same CRDs (here upstream's, in
// another namespace) fails it, named with what to do; an exclusion list in
// upstream's legacy forms is listed as a difference.
func TestReleaseCheckMigration(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns, other = "eraser-check-migration", "upstream-eraser"
	ensureNamespace(t, ns)
	ensureNamespace(t, other)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n"}}
	list := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Labels: map[string]string{"eraser.sh/exclude.list": "true"}},
		Data: map[string]string{"list.json": `{"excluded":["nginx:1.*"]}`}}
	labels := map[string]string{"control-plane": "controller-manager"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "eraser-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/eraser-dev/eraser-manager:v1.4.1", Command: []string{"/manager"}}}}},
		},
	}
	for _, o := range []client.Object{cm, list, dep} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	out, code := runCheck(t, ns)
	for _, want := range []string{"FAILED no other Eraser manager acts on the CRDs", "deployment/upstream-eraser/eraser-controller-manager", "upstream Eraser v1.4.1",
		"configmap/eraser-check-migration/legacy", `"nginx:1.*": read as a glob`} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want 1 with %q", code, want)
		}
	}
}
