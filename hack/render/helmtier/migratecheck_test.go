package helmtier

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/cli/plugin"
)

// kubectl eraser migrate check on a cluster running upstream's released
// chart v1.4.1, installed with its values and an include node filter,
// beside upstream-style exclusion lists, ImageLists upstream ignored or
// that hold "*", and a Deployment shaped as AKS's Image Cleaner add-on in
// kube-system: each is reported, the add-on as blocking.
func TestMigrateCheckUpstreamChart(t *testing.T) {
	dir := upstreamChartDir()
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		t.Skipf("upstream's chart v1.4.1 is not at %s; TestMigrate* in internal/manager/migration ran the checks on listed objects instead", dir)
	}
	c := newCluster(t)
	c.createNamespace()
	values := filepath.Join(t.TempDir(), "include.yaml")
	if err := os.WriteFile(values, []byte("runtimeConfig:\n  manager:\n    nodeFilter:\n      type: include\n      selectors: [team=a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.helm("install", release, dir, "-n", namespace, "-f", filepath.Join(dir, "values.yaml"), "-f", values)
	c.waitEstablished()
	c.kubectlIn(`apiVersion: v1
kind: ConfigMap
metadata:
  name: upstream-exclusions
  namespace: `+namespace+`
  labels: {eraser.sh/exclude.list: "true"}
data:
  list.json: '{"Excluded": ["nginx:1.*", "*/pause:*"], "comment": "from upstream"}'
  README: keeps nginx 1.x and every pause image
---
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: imagelist}
spec: {images: ["*"]}
---
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: team-a}
spec: {images: ["docker.io/library/alpine:3.19"]}
---
apiVersion: v1
kind: Namespace
metadata: {name: kube-system}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: eraser-controller-manager
  namespace: kube-system
  labels: {control-plane: controller-manager, addonmanager.kubernetes.io/mode: Reconcile}
spec:
  selector: {matchLabels: {control-plane: controller-manager}}
  template:
    metadata: {labels: {control-plane: controller-manager}}
    spec:
      containers:
      - name: manager
        image: mcr.microsoft.com/oss/eraser/eraser-manager:v1.3.1
`, "apply", "-f", "-")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := plugin.Main(ctx, []string{"migrate", "check", "--kubeconfig", c.env.KubeconfigPath, "-n", namespace}, nil, &out, &errOut)
	t.Logf("$ kubectl eraser migrate check (exit %d)\n%s%s", code, out.String(), errOut.String())
	if code != plugin.ExitBlocking {
		t.Errorf("exit %d, want %d (blocking)", code, plugin.ExitBlocking)
	}
	for _, want := range []string{
		"BLOCKING    manager        deployment/kube-system/eraser-controller-manager",
		"az aks update --disable-image-cleaner",
		"deployment/eraser-system/eraser-controller-manager",
		"upstream Eraser v1.4.1 (Helm release eraser) runs here",
		"type include (selectors team=a",
		"deleteFailedImages",
		`entry "nginx:1.*": read as a glob`,
		`entry "*/pause:*": read as a glob`,
		`entry "Excluded": read as "excluded"`,
		`entry "comment": unknown field`,
		`key "README": holds no exclusion list`,
		"imagelist/team-a",
		"imagelist/imagelist",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("migrate check does not report %q", want)
		}
	}
}
