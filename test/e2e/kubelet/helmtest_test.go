package kubelet

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// helmNamespace is this test's release's: apart from the other tests'.
const helmNamespace = "eraser-helm"

// helmCLI is the real Helm CLI, as hack/build-helm.sh built it: $HELM
// (make sets it), else the script's cache.
func helmCLI(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("HELM"); bin != "" {
		return bin
	}
	cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "build-helm.sh"))
	cmd.Env = append(os.Environ(), "CHECK_ONLY=1")
	if out, err := cmd.Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Helm CLI: HELM is unset and hack/build-helm.sh has not built it")
	}
	t.Skip("no Helm CLI: run make test-kubelet, which builds it")
	return ""
}

// helm runs the Helm CLI on the tier's cluster and returns its output and
// whether it succeeded.
func helm(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmCLI(t), args...)
	cmd.Env = append(append(os.Environ(), helmEnv(workDir)...), "KUBECONFIG="+cluster.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("$ helm %s\n%s", strings.Join(args, " "), out.String())
	return out.String(), err == nil
}

// The chart from the tier's registry installed with the real Helm CLI, and
// helm test on real kubelets: the release check's pod runs the manager's
// image with its own account and passes; with the manager scaled to zero
// it fails, saying the manager is not ready. helm uninstall then leaves the
// namespace to delete.
func TestHelmTest(t *testing.T) {
	requireCluster(t)
	ctx := testCtx(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	if err := kube.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The chart keeps the CRDs on uninstall; the other tests install their
	// own, and find none when they start.
	var crds []string
	for _, name := range []string{"imagelists.eraser.sh", "imagejobs.eraser.sh"} {
		err := kube.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			crds = append(crds, name)
		}
	}
	t.Cleanup(func() {
		helm(t, "uninstall", "eraser", "-n", helmNamespace, "--wait")
		bg := context.Background()
		for _, name := range crds {
			_ = kube.Delete(bg, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		_ = kube.Delete(bg, ns)
		eventually(t, 3*time.Minute, "the test's namespace and CRDs gone", func() (bool, string) {
			for _, name := range crds {
				if err := kube.Get(bg, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
					return false, "CRD " + name
				}
			}
			err := kube.Get(bg, client.ObjectKey{Name: helmNamespace}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), "namespace " + helmNamespace
		})
	})
	if _, ok := helm(t, "install", "eraser", "oci://"+registryPath+"/charts/eraser", "--version", e2eVersion, "--plain-http",
		"-n", helmNamespace, "--set", "runtimeConfig.components.collector.enabled=false", "--wait", "--timeout", "5m"); !ok {
		t.Fatal("helm install failed")
	}
	out, ok := helm(t, "test", "eraser", "-n", helmNamespace, "--logs", "--timeout", "5m")
	if !ok {
		t.Fatal("helm test failed on a working release")
	}
	for _, want := range []string{"Phase:", "Succeeded", "ok     the CRDs serve every field", "ok     the configuration is valid", "ok     the manager is ready", "ok     the manager answers a dry-run ImageList"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm test's output lacks %q", want)
		}
	}

	// The manager gone: the check fails, and says which part.
	scale := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: helmNamespace, Name: managerApp}}
	if err := kube.Patch(ctx, dep, scale); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the manager scaled to zero", func() (bool, string) {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 0, "ready replicas left"
	})
	out, ok = helm(t, "test", "eraser", "-n", helmNamespace, "--logs", "--timeout", "5m")
	if ok {
		t.Fatal("helm test passed with no manager running")
	}
	if !strings.Contains(out, "FAILED the manager is ready") {
		t.Errorf("helm test's output does not say the manager is not ready")
	}
}
