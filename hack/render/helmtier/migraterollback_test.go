package helmtier

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/plugin"
)

// kubectl eraser migrate rollback on this chart's release: it says that
// upstream would run the dry-run imagelist for real, and changes nothing;
// with --apply it saves that list and deletes it, leaving the other lists,
// and --export-reports saves the reports.
func TestMigrateRollback(t *testing.T) {
	c := newCluster(t)
	c.createNamespace()
	c.helm("install", release, ourChart(), "-n", namespace)
	c.waitEstablished()
	c.kubectlIn(`apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: imagelist}
spec: {images: ["*"], dryRun: true}
---
apiVersion: eraser.sh/v1
kind: ImageList
metadata: {name: team-a}
spec: {images: ["docker.io/library/alpine:3.19"], dryRun: true}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: imagejob-x-report-0
  namespace: `+namespace+`
  labels: {eraser.sh/report: imagejob-x}
data: {report: "{}"}
`, "apply", "-f", "-")

	run := func(args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var out, errOut bytes.Buffer
		code := plugin.Main(ctx, append([]string{"migrate", "rollback", "--kubeconfig", c.env.KubeconfigPath, "-n", namespace}, args...), nil, &out, &errOut)
		t.Logf("$ kubectl eraser migrate rollback %s (exit %d)\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
		return out.String(), code
	}
	out, code := run()
	if code != plugin.ExitBlocking || !strings.Contains(out, "imagelist/imagelist") || !strings.Contains(out, "removed for real") || !strings.Contains(out, "rollback --apply") {
		t.Errorf("exit %d, want %d naming imagelist/imagelist as a real removal", code, plugin.ExitBlocking)
	}
	list := &eraserv1.ImageList{}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Name: "imagelist"}, list); err != nil {
		t.Fatalf("without --apply the list must stay: %v", err)
	}

	saved, reports := t.TempDir(), filepath.Join(t.TempDir(), "reports")
	out, code = run("--apply", "--save-dir", saved, "--export-reports", reports)
	if code != plugin.ExitDifferences || !strings.Contains(out, "imagelist/imagelist saved in") || !strings.Contains(out, "saved 1 report ConfigMaps") {
		t.Errorf("--apply: exit %d, want %d, the list saved and the report exported", code, plugin.ExitDifferences)
	}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Name: "imagelist"}, list); !apierrors.IsNotFound(err) {
		t.Errorf("imagelist after --apply: %v, want it deleted", err)
	}
	if err := c.env.Client.Get(context.Background(), client.ObjectKey{Name: "team-a"}, list); err != nil {
		t.Errorf("team-a, which upstream ignores, must stay: %v", err)
	}
	manifest, err := os.ReadFile(filepath.Join(saved, "imagelist-imagelist.yaml"))
	if err != nil || !strings.Contains(string(manifest), "dryRun: true") {
		t.Errorf("saved manifest: %v\n%s", err, manifest)
	}
	// Applied again, it is the list as it was.
	c.kubectlDo("apply", "-f", filepath.Join(saved, "imagelist-imagelist.yaml"))
	if _, err := os.Stat(filepath.Join(reports, "report-imagejob-x-report-0.yaml")); err != nil {
		t.Errorf("exported report: %v", err)
	}
}
