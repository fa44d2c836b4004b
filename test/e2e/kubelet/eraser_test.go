//go:build linux

package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

const (
	namespace  = "eraser-system"
	managerApp = "eraser-controller-manager"
	configMap  = "eraser-manager-config"
	configKey  = "controller_manager_config.yaml"
	labelJob   = "eraser.sh/job"
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
	run := command(repoRoot(), "go", "-C", "scanner/trivy", "run", "./test/fixturedb", "-cache-dir", dir)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("writing the fixture DB: %v: %s", err, out)
	}
	return fmt.Sprintf(`apiVersion: eraser.sh/v1alpha3
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
    volumes:
    - name: trivy-db
      hostPath: {path: %[1]s, type: Directory}
    config: |
      cacheDir: %[1]s
      skipDBUpdate: true
      deleteEOLImages: false
`, dir)
}

// Test images are example.com/e2e/NAME:1, each with its own ID.
func testImage(name string) string { return "example.com/e2e/" + name + ":1" }

// The exclusion list protects the test's "excluded" image and Eraser's own
// images (which a "*" run would otherwise remove while they are unused, as
// in any cluster), those of the registry the tier released them to.
func exclusionList() string {
	return `{"excluded": ["example.com/e2e/excluded:*", "` + registryPath + `/*"]}`
}

// TestEraser proves the whole product as the Helm chart installs it.
func TestEraser(t *testing.T) {
	requireCluster(t)
	objects := installChart(t)

	t.Run("ImageListRemovesImagesFromEveryNode", func(t *testing.T) {
		victim, bystander := testImage("victim"), testImage("bystander")
		seed(t, cluster.Nodes, victim, bystander)
		createExclusionList(t)

		// Under the default minimum age (10m) "*" keeps what just arrived;
		// naming the image removes it all the same.
		fresh := runImageList(t, "fresh", eraserv1.PruneAll)
		if r := fresh.Status.Results; r == nil || r.Removed != 0 || r.TooYoung < int64(2*len(cluster.Nodes)) {
			t.Errorf(`"*" under the default minAge: results %+v; want the fresh images kept as too young`, r)
		}
		for _, n := range cluster.Nodes {
			expectImages(t, n, []string{victim, bystander}, nil)
		}

		// Upstream handled only an ImageList named "imagelist".
		il := runImageList(t, "imagelist", victim)
		if il.Status.Success != int64(len(cluster.Nodes)) || il.Status.Failed != 0 {
			t.Errorf("status: %d succeeded, %d failed; want %d, 0", il.Status.Success, il.Status.Failed, len(cluster.Nodes))
		}
		if r := il.Status.Results; r == nil || r.Removed != int64(len(cluster.Nodes)) || r.BytesFreed <= 0 {
			t.Errorf("results %+v: want the image removed once per node and its bytes counted", r)
		}
		for _, n := range cluster.Nodes {
			// The remover came from the tier's registry: nothing else
			// put Eraser's images on the nodes.
			expectImages(t, n, []string{bystander, eraserImage("remover")}, []string{victim})
		}
		expectJobsCleanedUp(t)
	})

	t.Run("ReportOutlivesThePods", reportOutlivesThePods)

	t.Run("PruneAllKeepsRunningSandboxAndExcludedImages", func(t *testing.T) {
		unused, excluded, running := testImage("unused"), testImage("excluded"), testImage("running")
		seed(t, cluster.Nodes, unused, excluded, running)
		seeded := time.Now()
		createExclusionList(t)
		setConfig(t, withRetention(baseConfig, removable))
		t.Cleanup(func() { setConfig(t, baseConfig) })
		first := cluster.Nodes[0]
		runPod(t, first.Name, "e2e-running", running)
		afterMinAge(seeded)
		// Eraser's images that each node pulled so far (the manager's on
		// its node, the remover's on every node): excluded, so kept.
		own := map[string][]string{}
		for _, n := range cluster.Nodes {
			for img := range nodeImages(t, n) {
				if strings.HasPrefix(img, registryPath+"/") {
					own[n.Name] = append(own[n.Name], img)
				}
			}
		}

		il := runImageList(t, "prune-all", eraserv1.PruneAll)
		if il.Status.Success != int64(len(cluster.Nodes)) || il.Status.Failed != 0 {
			t.Errorf("status: %d succeeded, %d failed; want %d, 0", il.Status.Success, il.Status.Failed, len(cluster.Nodes))
		}
		if r := il.Status.Results; r == nil || r.Removed < int64(len(cluster.Nodes)) || r.InUse == 0 || r.Excluded == 0 {
			t.Errorf("results %+v: want removed images, and images kept in use and excluded", r)
		}
		for i, n := range cluster.Nodes {
			keep := append([]string{excluded, testcontainerd.SandboxImage}, own[n.Name]...)
			gone := []string{unused}
			if i == 0 {
				keep = append(keep, running)
			} else {
				gone = append(gone, running)
			}
			expectImages(t, n, keep, gone)
		}
		expectJobsCleanedUp(t)
	})

	t.Run("ScheduledRunRemovesUnusedImages", func(t *testing.T) {
		unused, excluded := testImage("unused-scheduled"), testImage("excluded")
		seed(t, cluster.Nodes, unused, excluded)
		seeded := time.Now()
		createExclusionList(t)
		afterMinAge(seeded)
		setConfig(t, withRetention(scheduledConfig, removable))
		t.Cleanup(func() { setConfig(t, baseConfig) })

		// The run's pod chains collector and remover over a FIFO in a
		// shared emptyDir, on every node.
		goneFromEveryNode(t, 3*time.Minute, "the scheduled run to remove the unused image from every node", unused)
		for _, n := range cluster.Nodes {
			expectImages(t, n, []string{excluded, testcontainerd.SandboxImage}, nil)
		}
		expectJobsCleanedUp(t)
	})

	t.Run("ScheduledRunWithTrivyScanner", func(t *testing.T) {
		vulnerable, fixed := testImage("vulnerable"), testImage("fixed")
		seedAlpine(t, cluster.Nodes, map[string]string{vulnerable: "1.2.4-r2", fixed: "1.2.5-r0"})
		seeded := time.Now()
		afterMinAge(seeded)
		// The jobs and their reports are kept, for the scanner's verdicts.
		setConfig(t, strings.Replace(withRetention(scannerConfig(t), removable), "keepReportFor: 0s", "keepReportFor: 1h", 1))
		t.Cleanup(func() { setConfig(t, baseConfig) })

		// collector → trivy-scanner → remover in each node's pod; the
		// scanner reads the images from its node's containerd and judges
		// them against the DB seeded on the node.
		goneFromEveryNode(t, 4*time.Minute, "the scanned run to remove the vulnerable image from every node", vulnerable)
		for _, n := range cluster.Nodes {
			expectImages(t, n, []string{fixed, eraserImage("eraser-trivy-scanner"), testcontainerd.SandboxImage}, nil)
		}
		// The manager records what each node's scanner handed over.
		eventually(t, time.Minute, "vulnerable_images_run_total for every node on the manager's metrics endpoint", func() (bool, string) {
			body, err := managerMetrics(testCtx(t))
			if err != nil {
				return false, err.Error()
			}
			var missing []string
			for _, n := range cluster.Nodes {
				if !strings.Contains(body, `vulnerable_images_run_total{node_name="`+n.Name+`"}`) {
					missing = append(missing, n.Name)
				}
			}
			return len(missing) == 0, fmt.Sprintf("no series for %v", missing)
		})
		scanVerdictsInReport(t, cluster.Nodes, baseConfig, vulnerable, fixed)
		expectJobsCleanedUp(t)
	})

	t.Run("ScheduledDiskPressureRunAndDryRun", func(t *testing.T) {
		diskPressure(t)
	})

	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) {
		uninstall(t, objects)
	})
}

// policyResult is the job's total for one policy (zero when absent).
func policyResult(r *eraserv1.ImageResults, p eraserv1.RemovalPolicy) eraserv1.PolicyResult {
	if r != nil {
		for _, pr := range r.Policies {
			if pr.Policy == p {
				return pr
			}
		}
	}
	return eraserv1.PolicyResult{Policy: p}
}

// finishedScheduledJob waits for a scheduled job, a dry run or not, to
// complete, and returns it. The configuration in force decides what the
// next job is: jobs started before it came in force (dry runs, when a real
// run is wanted) are told apart by the dry-run annotation.
func finishedScheduledJob(t *testing.T, dryRun bool) *eraserv1.ImageJob {
	t.Helper()
	var found *eraserv1.ImageJob
	eventually(t, 4*time.Minute, fmt.Sprintf("a scheduled job (dry run: %v) to complete", dryRun), func() (bool, string) {
		var jobs eraserv1.ImageJobList
		if err := kube.List(testCtx(t), &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range jobs.Items {
			j := &jobs.Items[i]
			seen = append(seen, fmt.Sprintf("%s %s", j.Name, j.Status.Phase))
			if (j.Annotations[eraserv1.AnnotationDryRun] == "true") != dryRun {
				continue
			}
			if j.Status.Phase == eraserv1.PhaseCompleted && j.Status.Results != nil {
				found = j
				return true, ""
			}
			if j.Status.Phase == eraserv1.PhaseFailed {
				t.Fatalf("scheduled job %s failed: %+v", j.Name, j.Status)
			}
		}
		return false, fmt.Sprintf("jobs: %v", seen)
	})
	t.Logf("ImageJob %s: results %+v", found.Name, found.Status.Results)
	return found
}

// stopScheduledRuns turns scheduled runs off, waits for the one going to
// end, and deletes the jobs kept for their status.
func stopScheduledRuns(t *testing.T) {
	t.Helper()
	setConfig(t, baseConfig)
	ctx := testCtx(t)
	eventually(t, 3*time.Minute, "the scheduled run going to end", func() (bool, string) {
		var jobs eraserv1.ImageJobList
		if err := kube.List(ctx, &jobs); err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			if j.Status.Phase == "" || j.Status.Phase == eraserv1.PhaseRunning {
				return false, j.Name + " is running"
			}
		}
		return true, ""
	})
	if err := kube.DeleteAllOf(ctx, &eraserv1.ImageJob{}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	expectJobsCleanedUp(t)
}
