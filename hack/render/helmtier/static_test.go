package helmtier

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/repo"
)

// kubectl apply of our static manifest over upstream's (applied as upstream
// documents it, client-side) keeps every object, serves our CRDs, and our
// manager reconciles what was there; deleting all but the CRDs keeps every
// object. "overlay" runs docs/install.md's commands in the overlay it
// describes (a copy of deploy/eraser.yaml and the images of a release).
// Server-side apply over objects that client-side apply wrote conflicts on
// the fields whose values change (the Deployment's, here) without
// --force-conflicts.
func TestStaticManifestOverUpstream(t *testing.T) {
	overlay := docsOverlay(t)
	for name, args := range map[string][]string{
		"overlay":     {"apply", "--server-side", "--force-conflicts", "-k", overlay},
		"client-side": {"apply", "-f", filepath.Join(repo.Root(), "deploy", "eraser.yaml")},
		// The kustomization deploy/eraser.yaml is rendered from, through
		// kubectl's own kustomize.
		"kustomize": {"apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repo.Root(), "config", "default")},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			c.kubectlIn(upstreamStatic(c, false), "apply", "-f", "-")
			c.waitEstablished()
			c.createUserObjects()

			c.kubectlDo(args...)
			c.userObjectsKept("after kubectl " + strings.Join(args, " "))
			c.servesOurCRDs()
			c.managerTakesOver("migrate-v1", eraserv1.ReasonNotRunOnAdoption)

			c.kubectlDo("delete", "-k", overlay, "-l", "app.kubernetes.io/component!=api", "--wait=false")
			c.userObjectsKept("after kubectl delete of all but the CRDs")
			if _, err := c.run(c.kubectl, "", "get", "deployment", "-n", namespace, "eraser-controller-manager"); err == nil {
				t.Error("the manager's Deployment is still there after kubectl delete")
			}
			// The namespace holds the exclusion lists: it stays with the API.
			ns := &corev1.Namespace{}
			if err := c.env.Client.Get(context.Background(), client.ObjectKey{Name: namespace}, ns); err != nil || ns.DeletionTimestamp != nil {
				t.Errorf("namespace %s after kubectl delete of all but the API: %v, deleting since %v", namespace, err, ns.DeletionTimestamp)
			}
		})
	}
}

// docsOverlay is the overlay docs/install.md tells a user to write: a copy
// of deploy/eraser.yaml beside a kustomization naming a release's images.
func docsOverlay(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	kustomization := `resources:
- eraser.yaml
images:
- name: ghcr.io/eraser-oss/eraser-manager
  newName: registry.example/eraser/eraser-manager
  newTag: 1.2.3
`
	err := os.WriteFile(filepath.Join(dir, "eraser.yaml"), staticManifest(t), 0o644)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// staticManifest is deploy/eraser.yaml.
func staticManifest(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo.Root(), "deploy", "eraser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// upstreamStatic renders the fixture as upstream's static manifest is (a
// Namespace, no Helm labels); crdsOnly keeps only its CRDs.
func upstreamStatic(c *cluster, onlyCRDs bool) string {
	c.t.Helper()
	out := c.helm("template", release, upstreamShapedChart(), "-n", namespace, "--set", "global.static=true")
	if onlyCRDs {
		return crdsOnly(c.t, []byte(out))
	}
	return out
}

// crdsOnly keeps the CustomResourceDefinitions of a multi-document stream.
func crdsOnly(t *testing.T, stream []byte) string {
	t.Helper()
	var keep []string
	for _, doc := range strings.Split(string(stream), "\n---") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("parsing a manifest document: %v", err)
		}
		if head.Kind == "CustomResourceDefinition" {
			keep = append(keep, doc)
		}
	}
	if len(keep) != 2 {
		t.Fatalf("%d CRDs in the manifest, want 2", len(keep))
	}
	return strings.Join(keep, "\n---")
}

// chartWithoutField is a copy of our chart whose ImageJob CRD lacks the
// status field name in every version: the chart before a schema change.
func chartWithoutField(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "eraser")
	if err := os.CopyFS(dir, os.DirFS(ourChart())); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "files", "crds", "eraser.sh_imagejobs.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range dig[[]any](t, crd, "spec", "versions") {
		props := dig[map[string]any](t, v.(map[string]any), "schema", "openAPIV3Schema", "properties", "status", "properties")
		if _, ok := props[name]; !ok {
			t.Fatalf("the chart's ImageJob CRD has no status.%s to remove", name)
		}
		delete(props, name)
	}
	if b, err = yaml.Marshal(crd); err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// hasStatusField says whether the live ImageJob CRD's v1 schema has the
// status field name.
func (c *cluster) hasStatusField(name string) bool {
	c.t.Helper()
	crd := c.crd(imageJobsCRD)
	if crd == nil {
		c.t.Fatal("no ImageJob CRD")
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			_, ok := v.Schema.OpenAPIV3Schema.Properties["status"].Properties[name]
			return ok
		}
	}
	c.t.Fatal("the ImageJob CRD has no v1 schema")
	return false
}

// dig walks nested maps of a decoded YAML document.
func dig[T any](t *testing.T, m map[string]any, path ...string) T {
	t.Helper()
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("no %v in the document", path)
		}
		cur = mm[p]
	}
	v, ok := cur.(T)
	if !ok {
		t.Fatalf("%v is a %T", path, cur)
	}
	return v
}
