//go:build linux

package kubelet

// Installing Eraser as users do (the static manifest, the chart with
// values) and uninstalling it, leaving nothing behind.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/testing/crdwait"
)

// TestStaticManifest installs Eraser from deploy/eraser.yaml rendered for
// the registry the tier released to (its manager image rewritten by a
// kustomization's images, as a user installing a release from their own
// registry would), removes an image with an ImageList and uninstalls.
func TestStaticManifest(t *testing.T) {
	requireCluster(t)
	objects := install(t, staticManifest(t))

	t.Run("ImageListRemovesAnImage", func(t *testing.T) {
		victim := testImage("manifest-victim")
		seed(t, cluster.Nodes, victim)
		il := runImageList(t, "manifest", victim)
		if il.Status.Success != int64(len(cluster.Nodes)) || il.Status.Failed != 0 {
			t.Errorf("status: %d succeeded, %d failed; want %d, 0", il.Status.Success, il.Status.Failed, len(cluster.Nodes))
		}
		for _, n := range cluster.Nodes {
			expectImages(t, n, nil, []string{victim})
		}
		expectJobsCleanedUp(t)
	})

	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) {
		uninstall(t, objects)
	})
}

// staticManifest renders deploy/eraser.yaml for the tier's registry and
// version with a kustomization (hack/render's kustomize build); the workers
// default to the registry the released manager was built for.
func staticManifest(t *testing.T) []byte {
	t.Helper()
	root := repoRoot()
	shipped, err := os.ReadFile(filepath.Join(root, "deploy", "eraser.yaml"))
	if err != nil {
		t.Fatalf("reading the install manifest (make manifests writes it): %v", err)
	}
	dir := t.TempDir()
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- eraser.yaml
images:
- name: ghcr.io/eraser-oss/eraser-manager
  newName: %s/eraser-manager
  newTag: %s
`, registryPath, e2eVersion)
	if err := os.WriteFile(filepath.Join(dir, "eraser.yaml"), shipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	render := command(root, "go", "-C", "hack/render", "run", "./cmd/kustomize", dir)
	var stderr bytes.Buffer
	render.Stderr = &stderr
	manifest, err := render.Output()
	if err != nil {
		t.Fatalf("rendering deploy/eraser.yaml for %s: %v\n%s", registryPath, err, stderr.Bytes())
	}
	if want := "image: " + eraserImage("eraser-manager"); !bytes.Contains(manifest, []byte(want)) {
		t.Fatalf("the rendered manifest has no %q:\n%s", want, manifest)
	}
	return manifest
}

// installChart installs Eraser as helm install oci://REGISTRY/charts/eraser
// --version VERSION does, with no values file: the chart pulled from the
// tier's registry and rendered by hack/render (Helm's SDK, no helm
// binary), into a namespace made as docs/install.md says.
func installChart(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	return installChartValues(t, "")
}

// installChartValues is installChart with a values file (helm install -f),
// when values is not empty; the configuration is then the one the chart
// renders from it, not baseConfig.
func installChartValues(t *testing.T, values string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot()
	args := []string{"-C", "hack/render", "run", "./cmd/chart", "--version", e2eVersion, "--plain-http"}
	config := baseConfig
	if values != "" {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		args, config = append(args, "-f", file), ""
	}
	render := command(root, "go", append(args, "oci://"+registryPath+"/charts/eraser")...)
	render.Env = append(render.Env, helmEnv(workDir)...)
	var stderr bytes.Buffer
	render.Stderr = &stderr
	manifest, err := render.Output()
	if err != nil {
		t.Fatalf("rendering the chart: %v\n%s", err, stderr.Bytes())
	}
	if !bytes.Contains(manifest, []byte(eraserPinned("eraser-manager"))) {
		t.Fatalf("the chart from the registry does not run %s:\n%s", eraserPinned("eraser-manager"), manifest)
	}
	// The chart leaves the namespace to the installer, as helm does;
	// these are the labels docs/install.md gives it.
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(namespace)
	ns.SetLabels(map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/audit":   "restricted",
	})
	return installConfig(t, manifest, config, ns)
}

// eraserImage is an image of the release in the tier's registry, by its
// repository (eraser-manager, collector, remover, eraser-trivy-scanner).
func eraserImage(repo string) string { return registryPath + "/" + repo + ":" + e2eVersion }

// eraserPinned is that image as the released chart names it: by tag and
// digest (a node that pulled it lists it by digest alone).
func eraserPinned(repo string) string { return eraserImage(repo) + "@" + releasedDigests[repo] }

// install creates the objects of a manifest, with the test configuration
// in the manager's ConfigMap, and waits for the manager to be available,
// which proves it reaches the API server from its pod.
func install(t *testing.T, manifest []byte, extra ...*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	return installConfig(t, manifest, baseConfig, extra...)
}

// installConfig is install with config in the manager's ConfigMap, or the
// manifest's own when config is "".
func installConfig(t *testing.T, manifest []byte, config string, extra ...*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	objects := extra
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding the manifest: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "ConfigMap" && obj.GetName() == configMap && config != "" {
			if err := unstructured.SetNestedField(obj.Object, config, "data", configKey); err != nil {
				t.Fatal(err)
			}
		}
		objects = append(objects, obj)
	}
	ctx := testCtx(t)
	for _, obj := range objects {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			crdwait.Established(t, kube, time.Minute, obj.GetName())
		}
	}
	eventually(t, 3*time.Minute, "the manager Deployment to be available", func() (bool, string) {
		var d appsv1.Deployment
		if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: managerApp}, &d); err != nil {
			return false, err.Error()
		}
		return d.Status.AvailableReplicas >= 1, fmt.Sprintf("status %+v", d.Status)
	})
	return objects
}

// uninstall deletes what install created and checks that nothing of Eraser
// is left: not in the API server, not running on any node.
func uninstall(t *testing.T, objects []*unstructured.Unstructured) {
	t.Helper()
	ctx := testCtx(t)
	for _, obj := range slices.Backward(objects) {
		err := kube.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, obj := range objects {
		key := client.ObjectKeyFromObject(obj)
		eventually(t, 3*time.Minute, fmt.Sprintf("%s %s to be gone", obj.GetKind(), key), func() (bool, string) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(obj.GroupVersionKind())
			err := kube.Get(ctx, key, u)
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
	}
	var roles rbacv1.ClusterRoleList
	var bindings rbacv1.ClusterRoleBindingList
	if err := kube.List(ctx, &roles); err != nil {
		t.Fatal(err)
	}
	if err := kube.List(ctx, &bindings); err != nil {
		t.Fatal(err)
	}
	for _, r := range roles.Items {
		if strings.Contains(r.Name, "eraser") {
			t.Errorf("ClusterRole %s left behind", r.Name)
		}
	}
	for _, b := range bindings.Items {
		if strings.Contains(b.Name, "eraser") {
			t.Errorf("ClusterRoleBinding %s left behind", b.Name)
		}
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.HasLabels{labelJob}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("worker pod %s/%s left behind", p.Namespace, p.Name)
	}
	// The kubelets stop the namespace's containers as its pods go.
	for _, n := range append(append([]Node{}, cluster.Nodes...), crioNodes...) {
		eventually(t, 2*time.Minute, n.Name+" to run no Eraser container", func() (bool, string) {
			// A container names its image by a tag or an ID.
			own := map[string]bool{}
			imgs, err := criClient(t, n).ListImages(testCtx(t))
			if err != nil {
				return false, err.Error()
			}
			for _, img := range imgs {
				for _, tag := range img.Tags {
					if strings.HasPrefix(tag, registryPath+"/") {
						own[img.ID], own[tag] = true, true
					}
				}
			}
			var running []string
			for _, c := range nodeContainers(t, n) {
				if c.State == "CONTAINER_RUNNING" && (own[c.Image] || own[c.ImageRef] || own[c.ImageID] || strings.HasPrefix(c.Image, registryPath+"/")) {
					running = append(running, c.Name)
				}
			}
			return len(running) == 0, fmt.Sprintf("running: %v", running)
		})
	}
}
