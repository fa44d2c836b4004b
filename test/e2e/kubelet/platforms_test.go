//go:build linux

package kubelet

// The platform values files (examples/values) installed as their comments
// say, on real kubelets.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/crdwait"
)

// sccCRD is the stand-in for OpenShift's SecurityContextConstraints kind
// that the chart's render tests also use.
const sccCRD = "securitycontextconstraints.security.openshift.io"

// platformCase is what the tier needs besides a values file as shipped.
type platformCase struct {
	// set are the --set overrides the tier's nodes need, each with why in
	// the table below.
	set []string
	// crio runs the file's ImageList on the CRI-O nodes, lifting the label
	// that keeps them out of the other tests' runs.
	crio bool
}

// Every file installs with imageRegistry (its comment's --set
// imageRegistry=...: the tier's loopback registry) and without the
// collector, which the default schedule would start at once: a scheduled
// scan needs the vulnerability DB from the Internet, which the tier's nodes
// cannot reach, and would remove the other tests' images. Besides these:
//   - k3s, RKE2: their containerd socket is k3s's; the tier's containerd
//     listens at containerd's default.
//   - OpenShift: the cluster is mixed (containerd nodes and one CRI-O node),
//     one runtime per configuration, so the workers keep to the CRI-O node
//     by its runtime label. Its SCC API is a stand-in CRD: the SCC and its
//     RBAC are accepted, never enforced (no SCC admission here).
//   - AKS with Windows pools, EKS: nothing; no Windows node here, so the
//     Windows runtime address and the Windows workers are not run.
var platformCases = map[string]platformCase{
	"aks-windows.yaml": {},
	"eks.yaml":         {},
	"k3s.yaml":         {set: []string{"runtimeConfig.manager.runtime.address=unix:///run/containerd/containerd.sock"}},
	"rke2.yaml":        {set: []string{"runtimeConfig.manager.runtime.address=unix:///run/containerd/containerd.sock"}},
	"openshift.yaml": {crio: true, set: []string{
		`runtimeConfig.manager.imageJob.nodeSelector.kubecluster\.eraser\.sh/runtime=crio`}},
}

// TestPlatformValues installs the released chart with each platform values
// file of examples/values, one release at a time in the same namespace:
// the manager becomes ready, helm test passes, and a dry-run ImageList
// completes on the nodes of the file's runtime; each release is uninstalled
// before the next, since a manager holds back while another runs.
func TestPlatformValues(t *testing.T) {
	requireCluster(t)
	ctx := testCtx(t)
	files, err := filepath.Glob(filepath.Join(repoRoot(), "examples", "values", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range platformCases {
		if !slices.Contains(names, name) {
			t.Errorf("examples/values/%s is gone: drop it from platformCases", name)
		}
	}
	for _, name := range names {
		if _, ok := platformCases[name]; !ok {
			t.Errorf("examples/values/%s has no case: add it to platformCases", name)
		}
	}
	// The chart keeps the CRDs on uninstall; the other tests find none
	// when they start.
	crds := absentCRDs(t, "imagelists.eraser.sh", "imagejobs.eraser.sh", sccCRD)
	if slices.Contains(crds, sccCRD) {
		createSCCStandIn(t)
	}
	t.Cleanup(func() {
		bg := context.Background()
		for _, name := range crds {
			_ = kube.Delete(bg, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		eventually(t, 3*time.Minute, "the test's CRDs gone", func() (bool, string) {
			for _, name := range crds {
				if err := kube.Get(bg, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
					return false, "CRD " + name
				}
			}
			return true, ""
		})
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/audit":   "restricted",
	}}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s (is another test's install alive?): %v", namespace, err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), ns)
		eventually(t, 3*time.Minute, "namespace "+namespace+" gone", func() (bool, string) {
			err := kube.Get(context.Background(), client.ObjectKey{Name: namespace}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
	})

	for _, name := range names {
		c, ok := platformCases[name]
		if !ok {
			continue
		}
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			installPlatform(t, filepath.Join(repoRoot(), "examples", "values", name), c)
		})
	}
}

// installPlatform is one file's install, checks and uninstall.
func installPlatform(t *testing.T, file string, c platformCase) {
	nodes := cluster.Nodes
	if c.crio {
		if len(crioNodes) == 0 {
			t.Fatal("no CRI-O node in the cluster: " + crioMissing)
		}
		nodes = crioNodes
		for _, n := range crioNodes {
			setFiltered(t, n.Name, false)
			t.Cleanup(func() { setFiltered(t, n.Name, true) })
		}
	}
	args := []string{"install", "eraser", "oci://" + registryPath + "/charts/eraser", "--version", e2eVersion, "--plain-http",
		"-n", namespace, "-f", file,
		"--set", "imageRegistry=" + registryPath,
		"--set", "runtimeConfig.components.collector.enabled=false"}
	for _, s := range c.set {
		args = append(args, "--set", s)
	}
	// Registered before the install, so that a failed one is removed too
	// and never holds the next file's manager back.
	t.Cleanup(func() { uninstallPlatform(t) })
	if _, ok := helm(t, append(args, "--wait", "--timeout", "5m")...); !ok {
		t.Fatal("helm install failed")
	}
	out, ok := helm(t, "test", "eraser", "-n", namespace, "--logs", "--timeout", "5m")
	if !ok {
		t.Fatal("helm test failed")
	}
	for _, want := range []string{"ok     the configuration is valid", "ok     the manager is ready", "ok     the manager answers a dry-run ImageList"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm test's output lacks %q", want)
		}
	}

	il := dryRunImageList(t, "platform-dry-run", "127.0.0.1:1/e2e/absent:1")
	others := len(cluster.Nodes) + len(crioNodes) - len(nodes)
	if il.Status.Success != int64(len(nodes)) || il.Status.Failed != 0 || il.Status.Skipped != int64(others) {
		t.Errorf("dry-run ImageList: %d succeeded, %d failed, %d skipped; want %d, 0, %d",
			il.Status.Success, il.Status.Failed, il.Status.Skipped, len(nodes), others)
	}
}

// dryRunImageList is runImageList with spec.dryRun.
func dryRunImageList(t *testing.T, name string, images ...string) *eraserv1.ImageList {
	t.Helper()
	return runList(t, &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: eraserv1.ImageListSpec{Images: images, DryRun: true}})
}

// uninstallPlatform removes the release and waits until no pod of it is
// left in the namespace, so that the next file's manager finds no other.
// The helm test pod is Helm's to keep for its logs (the next helm test
// replaces it); the namespace goes with the test.
func uninstallPlatform(t *testing.T) {
	helm(t, "uninstall", "eraser", "-n", namespace, "--wait", "--timeout", "3m")
	eventually(t, 3*time.Minute, "no pod of the release left in "+namespace, func() (bool, string) {
		var pods corev1.PodList
		if err := kube.List(context.Background(), &pods, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		var left []string
		for _, p := range pods.Items {
			if p.Annotations["helm.sh/hook"] != "test" {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("pods %v", left)
	})
}

// absentCRDs are those of names the cluster does not serve.
func absentCRDs(t *testing.T, names ...string) []string {
	t.Helper()
	var absent []string
	for _, name := range names {
		err := kube.Get(testCtx(t), client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			absent = append(absent, name)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return absent
}

// createSCCStandIn serves OpenShift's SecurityContextConstraints kind from
// hack/render's stand-in CRD, so that the API server accepts the chart's
// SCC.
func createSCCStandIn(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "hack", "render", "testdata", "openshift-scc-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatalf("decoding the SCC stand-in: %v", err)
	}
	if err := kube.Create(testCtx(t), crd); err != nil {
		t.Fatalf("creating the SCC stand-in: %v", err)
	}
	crdwait.Established(t, kube, time.Minute, sccCRD)
}
