//go:build linux

package kubelet

// The configurations the tier runs Eraser with, the exclusion list, and
// setting them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/repo"
)

// baseConfig is the shipped configuration with what a test run needs: no
// scheduled runs until a test turns them on, finished jobs removed at once,
// failed ones kept for the diagnostics.
const baseConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  runtime:
    name: containerd
    address: unix:///run/containerd/containerd.sock
  imageJob:
    successRatio: 1.0
    cleanup:
      delayOnSuccess: 0s
      delayOnFailure: 1h
      keepReportFor: 0s
components:
  collector:
    enabled: false
  scanner:
    enabled: false
`

// scheduledConfig turns on scheduled runs (collector and remover, no
// scanner), the first one now.
const scheduledConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  runtime:
    name: containerd
    address: unix:///run/containerd/containerd.sock
  scheduling:
    repeatInterval: 24h
    beginImmediately: true
  imageJob:
    successRatio: 1.0
    cleanup:
      delayOnSuccess: 0s
      delayOnFailure: 1h
      keepReportFor: 0s
components:
  collector:
    enabled: true
  scanner:
    enabled: false
`

// withRetention adds manager.retention keys (YAML, one per line) to a
// configuration.
func withRetention(config string, keys ...string) string {
	block := "manager:\n  retention:\n"
	for _, k := range keys {
		block += "    " + k + "\n"
	}
	return strings.Replace(config, "manager:\n", block, 1)
}

// removable is the minimum age of the scenarios about removal: the tier
// imports its images seconds before it runs Eraser, and under the default
// (10m) they would all be kept as too young.
const removable = "minAge: 1s"

// afterMinAge waits until images whose records were all written by since
// are older than the removal scenarios' minimum age. since is taken once
// the import is done: an image's age is its newest record's (a repository
// digest importImages adds seconds after the tag, on a loaded machine),
// and one younger than minAge is kept as too young.
func afterMinAge(since time.Time) {
	time.Sleep(time.Until(since.Add(1100 * time.Millisecond)))
}

// scannerConfig turns on scheduled runs with the Trivy scanner, its
// vulnerability DB seeded on the nodes (the air-gapped set-up: a hostPath,
// no download), by the scanner module's fixturedb command.
func scannerConfig(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(stateDir+"-trivy", "cache")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(dir)) })
	run := command(repo.Path(gobuild.Scanner), fixtureDB.Path(t), "-cache-dir", dir)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("writing the fixture DB: %v: %s", err, out)
	}
	return scheduledScanConfig(fmt.Sprintf(`    volumes:
    - name: trivy-db
      hostPath: {path: %[1]s, type: Directory}
    config: |
      cacheDir: %[1]s
      skipDBUpdate: true
      deleteEOLImages: false
`, dir))
}

// servedScannerConfig turns on scheduled runs with the Trivy scanner, its
// vulnerability DB from repo: fetched by the manager once for the cluster,
// and handed by it to every node's scanner.
func servedScannerConfig(repo string) string {
	return scheduledScanConfig(fmt.Sprintf(`    config: |
      dbRepo: %s
      deleteEOLImages: false
`, repo))
}

// scheduledScanConfig is a configuration of scheduled runs every minute
// with the Trivy scanner, whose settings (the keys under
// components.scanner after its request) are scanner.
func scheduledScanConfig(scanner string) string {
	return `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  runtime:
    name: containerd
    address: unix:///run/containerd/containerd.sock
  scheduling:
    repeatInterval: 1m
    beginImmediately: true
  imageJob:
    successRatio: 1.0
    cleanup:
      delayOnSuccess: 0s
      delayOnFailure: 1h
      keepReportFor: 0s
components:
  collector:
    enabled: true
  scanner:
    enabled: true
    request: {cpu: 100m, mem: 100Mi}
` + scanner
}

// The exclusion list protects the test's "excluded" image and Eraser's own
// images (which a "*" run would otherwise remove while they are unused, as
// in any cluster), those of the registry the tier released them to.
func exclusionList() string {
	return `{"excluded": ["example.com/e2e/excluded:*", "` + registryPath + `/*"]}`
}

func createExclusionList(t *testing.T) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-exclusions", Namespace: namespace,
			Labels: map[string]string{"eraser.sh/exclude.list": "true"}},
		Data: map[string]string{"e2e.json": exclusionList()},
	}
	if err := kube.Create(testCtx(t), cm); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func setConfig(t *testing.T, config string) {
	t.Helper()
	var cm corev1.ConfigMap
	ctx := testCtx(t)
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: configMap}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[configKey] = config
	if err := kube.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	// The manager records a document once it is in force: from then on
	// every new job runs with it, so no scenario races the reload.
	eventually(t, time.Minute, "the manager to apply the configuration", func() (bool, string) {
		got, err := eraserconfig.Recorded(ctx, kube, client.ObjectKeyFromObject(&cm), configKey)
		if err != nil {
			return false, err.Error()
		}
		return string(got) == config, "an earlier document is in force"
	})
}
