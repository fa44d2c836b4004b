//go:build linux

package kubelet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/configstore"
	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/diskusage"
	"github.com/eraser-oss/eraser/internal/nodereport"
	"github.com/eraser-oss/eraser/internal/testcontainerd"
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

// diskConfig turns on scheduled runs whose only policy is disk pressure,
// at the given thresholds, measured at the default imageFsPath
// (/var/lib/containerd, where each node's pods see its containerd root).
// Finished jobs are kept for their status (the test deletes them); runs
// follow each other a second apart, so each configuration gets a run soon
// whatever the schedule's history.
func diskConfig(high, low int, dryRun bool) string {
	return fmt.Sprintf(`apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  runtime:
    name: containerd
    address: unix:///run/containerd/containerd.sock
  scheduling:
    repeatInterval: 1s
    dryRun: %[3]v
  retention:
    %[4]s
    highThresholdPercent: %[1]d
    lowThresholdPercent: %[2]d
  imageJob:
    successRatio: 1.0
    cleanup:
      delayOnSuccess: 1h
      delayOnFailure: 1h
components:
  collector:
    enabled: true
  scanner:
    enabled: false
`, high, low, dryRun, removable)
}

// diskPressure fills each node's image filesystem (a tmpfs, see
// imageFsMiB) with test images, sets the thresholds from a measurement so
// that the images fill the span between them, and checks a scheduled dry
// run (the plan, nothing removed) and a scheduled run (the filesystem
// brought below the low threshold, some images kept as not needed).
func diskPressure(t *testing.T) {
	ctx := testCtx(t)
	createExclusionList(t)
	// Older than the fillers: least recently used first, it would go first.
	bystander := testImage("disk-bystander")
	seed(t, cluster.Nodes, bystander)
	// Only the fillers may go: the other scenarios' images are excluded
	// for the while, Eraser's are by the tier's list, pause is pinned.
	only := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-disk-pressure", Namespace: namespace,
			Labels: map[string]string{"eraser.sh/exclude.list": "true"}},
		Data: map[string]string{"e2e.json": `{"excluded": ["example.com/e2e/*"]}`},
	}
	if err := kube.Create(ctx, only); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), only) })
	// The run's own images arrive before the measurement, not during it.
	for _, n := range cluster.Nodes {
		for _, repo := range []string{"collector", "remover"} {
			if out, err := command(repoRoot(), "ctr", "--address", n.Socket, "--namespace", "k8s.io", "images", "pull", "--plain-http", eraserImage(repo)).CombinedOutput(); err != nil {
				t.Fatalf("pulling %s into %s: %v: %s", eraserImage(repo), n.Name, err, out)
			}
		}
	}

	usage := func(n Node) diskusage.Usage {
		u, err := diskusage.Stat(n.ImageFs)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	empty := map[string]diskusage.Usage{}
	for _, n := range cluster.Nodes {
		empty[n.Name] = usage(n)
	}
	const fillers, fillerBytes = 16, 8 << 20
	var tags []string
	var imgs []testcontainerd.Image
	pause := testcontainerd.Pause(t)
	for i := range fillers {
		tag := fmt.Sprintf("example.com/fill/%d:1", i)
		tags = append(tags, tag)
		imgs = append(imgs, testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: fillerBytes})
	}
	importImages(t, cluster.Nodes, imgs)
	seeded := time.Now()
	t.Cleanup(func() {
		// Whatever the runs kept goes, so that later runs see the tier's
		// usual images only.
		for _, n := range cluster.Nodes {
			removeImages(t, n, tags...)
		}
	})
	full := map[string]diskusage.Usage{}
	// Every node must be at or above high with the fillers, and below low
	// without them (with room for what the run itself writes: its pods'
	// layers, containerd's metadata), so that the run stops in between.
	// The plan (all a dry run has) estimates by image size, about half of
	// what an image takes here (its blob and its unpacked layer), so it
	// takes about twice the fillers the real run needs: low is a quarter of
	// the fillers' span below high, for the plan to leave some as not
	// needed too.
	high, maxEmpty, span := 100, 0.0, 100.0
	for _, n := range cluster.Nodes {
		full[n.Name] = usage(n)
		high = min(high, int(full[n.Name].Percent()))
		maxEmpty = max(maxEmpty, empty[n.Name].Percent())
		span = min(span, full[n.Name].Percent()-empty[n.Name].Percent())
		t.Logf("%s: image filesystem %.1f%% of %d MiB without the fillers, %.1f%% with them",
			n.Name, empty[n.Name].Percent(), full[n.Name].Capacity>>20, full[n.Name].Percent())
	}
	low := high - max(2, int(span/4))
	if low < int(maxEmpty)+2 {
		t.Fatalf("the fillers span too little of the image filesystem for thresholds: %.1f%% without them, high %d%%, low %d%%", maxEmpty, high, low)
	}
	t.Logf("thresholds: high %d%%, low %d%%", high, low)
	afterMinAge(seeded)

	// The dry run: the plan and its totals, nothing removed.
	setConfig(t, diskConfig(high, low, true))
	t.Cleanup(func() { stopScheduledRuns(t) })
	dry := finishedScheduledJob(t, true)
	r := dry.Status.Results
	dp := policyResult(r, eraserv1.PolicyDiskPressure)
	if r == nil || !r.DryRun || dp.Removed == 0 || dp.BytesFreed <= 0 || r.NotNeeded == 0 {
		t.Errorf("dry run %s: results %+v; want dryRun, DiskPressure removing some with their bytes, the rest not needed", dry.Name, r)
	}
	for _, n := range cluster.Nodes {
		expectImages(t, n, tags, nil)
		// containerd's metadata lives there too and may grow a page.
		if u := usage(n); u.Used()+4<<20 < full[n.Name].Used() {
			t.Errorf("%s: the dry run freed space: %d -> %d bytes used", n.Name, full[n.Name].Used(), u.Used())
		}
	}

	// The real run, with the same thresholds.
	setConfig(t, diskConfig(high, low, false))
	run := finishedScheduledJob(t, false)
	r = run.Status.Results
	dp = policyResult(r, eraserv1.PolicyDiskPressure)
	if r == nil || r.DryRun || dp.Removed == 0 || dp.BytesFreed <= 0 || r.Removed != dp.Removed || r.NotNeeded == 0 {
		t.Errorf("run %s: results %+v; want DiskPressure removing some with their bytes, the rest not needed", run.Name, r)
	}
	removed := 0
	for _, n := range cluster.Nodes {
		u := usage(n)
		if u.Percent() >= float64(low) {
			t.Errorf("%s: image filesystem at %.1f%% after the run, want below %d%%", n.Name, u.Percent(), low)
		}
		have := nodeImages(t, n)
		kept := 0
		for _, tag := range tags {
			if have[tag] {
				kept++
			}
		}
		if kept == 0 || kept == len(tags) {
			t.Errorf("%s: %d of %d fillers kept; want the run to stop below low, some removed and some kept", n.Name, kept, len(tags))
		}
		removed += len(tags) - kept
		t.Logf("%s: %.1f%% -> %.1f%%, %d of %d fillers removed", n.Name, full[n.Name].Percent(), u.Percent(), len(tags)-kept, len(tags))
		expectImages(t, n, []string{bystander, testcontainerd.SandboxImage}, nil)
	}
	if int64(removed) != dp.Removed {
		t.Errorf("%d fillers gone from the nodes, the job counts %d", removed, dp.Removed)
	}
	// Each node's workers keep their history in the node's own
	// /var/lib/eraser (a private mount of its directory), not the machine's.
	for _, n := range cluster.Nodes {
		if _, err := os.Stat(filepath.Join(n.Dir, "eraser", "images.state")); err != nil {
			t.Errorf("%s: no state file in the node's /var/lib/eraser: %v", n.Name, err)
		}
	}
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
	if !bytes.Contains(manifest, []byte(eraserImage("eraser-manager"))) {
		t.Fatalf("the chart from the registry does not run %s:\n%s", eraserImage("eraser-manager"), manifest)
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
			waitEstablished(t, obj.GetName())
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

func waitEstablished(t *testing.T, name string) {
	t.Helper()
	eventually(t, time.Minute, "CRD "+name+" to be established", func() (bool, string) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := kube.Get(testCtx(t), client.ObjectKey{Name: name}, &crd); err != nil {
			return false, err.Error()
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not established"
	})
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

// reportOutlivesThePods: after a real run, the job's report says per node
// what was removed and what was kept (a running container's image), after
// the worker pods are gone; kubectl eraser report (through the real kubectl)
// prints it; and deleting the job deletes the report.
func reportOutlivesThePods(t *testing.T) {
	setConfig(t, strings.Replace(baseConfig, "keepReportFor: 0s", "keepReportFor: 1h", 1))
	t.Cleanup(func() { setConfig(t, baseConfig) })
	reported, used := testImage("reported"), testImage("used")
	seed(t, cluster.Nodes, reported, used)
	busy := cluster.Nodes[0].Name
	runPod(t, busy, "uses-image", used)

	il := runImageList(t, "reported", reported, used)
	ctx := testCtx(t)
	job := &eraserv1.ImageJob{}
	eventually(t, 2*time.Minute, "the report to be complete and the worker pods gone", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: il.Status.Job}, job); err != nil {
			return false, fmt.Sprintf("ImageJob %q: %v", il.Status.Job, err)
		}
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{labelJob: job.Name}); err != nil {
			return false, err.Error()
		}
		rep := job.Status.Report
		return rep != nil && rep.Complete && len(pods.Items) == 0, fmt.Sprintf("report %+v, %d pods", rep, len(pods.Items))
	})
	shards, err := nodereport.Shards(ctx, kube, job.Status.Report.Namespace, job)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes = ran(nodes)
	if len(nodes) != len(cluster.Nodes) {
		t.Fatalf("report of %d nodes, want %d: %+v", len(nodes), len(cluster.Nodes), nodes)
	}
	for _, n := range nodes {
		outcomes := map[string]string{}
		for _, e := range n.Entries {
			outcomes[e.Image] = e.Outcome
		}
		wantUsed := "removed"
		if n.Name == busy {
			wantUsed = "in use"
		}
		if n.Unavailable != "" || outcomes[reported] != "removed" || outcomes[used] != wantUsed {
			t.Errorf("node %s: entries %v (unavailable: %q); want %s removed, %s %s", n.Name, outcomes, n.Unavailable, reported, used, wantUsed)
		}
	}

	out := kubectlEraser(t, "report", "imagelist/reported", "--node", busy)
	for _, want := range []string{busy, reported, "removed", used, "in use"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl eraser report lacks %q:\n%s", want, out)
		}
	}

	// Deleting the job deletes its report (the garbage collector follows
	// the shards' owner reference).
	if err := kube.Delete(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the report to go with its job", func() (bool, string) {
		var cms corev1.ConfigMapList
		if err := kube.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{eraserv1.LabelReport}); err != nil {
			return false, err.Error()
		}
		return len(cms.Items) == 0, fmt.Sprintf("%d report ConfigMaps", len(cms.Items))
	})
}

// kubectlEraser runs the kubectl plugin through the real kubectl, as an
// operator would, and returns its output.
func kubectlEraser(t *testing.T, args ...string) string {
	t.Helper()
	plugin := filepath.Join(workDir, "plugins", "kubectl-eraser")
	if _, err := os.Stat(plugin); err != nil {
		build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-eraser")
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building kubectl-eraser: %v: %s", err, out)
		}
	}
	cmd := exec.Command(filepath.Join(assetsDir, "kubectl"), append([]string{"eraser"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "PATH="+filepath.Dir(plugin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl eraser %v: %v: %s", args, err, out)
	}
	return string(out)
}

// runImageList creates an ImageList, waits for its run to finish and be
// recorded, and returns it.
func runImageList(t *testing.T, name string, images ...string) *eraserv1.ImageList {
	t.Helper()
	ctx := testCtx(t)
	il := &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: eraserv1.ImageListSpec{Images: images}}
	if err := kube.Create(ctx, il); err != nil {
		t.Fatalf("creating ImageList %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), il) })
	eventually(t, 3*time.Minute, "ImageList "+name+" to record its run", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(il), il); err != nil {
			return false, err.Error()
		}
		return il.Status.Timestamp != nil && il.Status.ObservedGeneration == il.Generation,
			fmt.Sprintf("status %+v", il.Status)
	})
	t.Logf("ImageList %s: %d succeeded, %d failed, results %+v", name, il.Status.Success, il.Status.Failed, il.Status.Results)
	return il
}

// expectJobsCleanedUp waits until no ImageJob is left, nor any pod or
// ConfigMap of one.
func expectJobsCleanedUp(t *testing.T) {
	t.Helper()
	ctx := testCtx(t)
	eventually(t, 2*time.Minute, "jobs, their pods and ConfigMaps to be removed", func() (bool, string) {
		var jobs eraserv1.ImageJobList
		var pods corev1.PodList
		var cms corev1.ConfigMapList
		if err := kube.List(ctx, &jobs); err != nil {
			return false, err.Error()
		}
		if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{labelJob}); err != nil {
			return false, err.Error()
		}
		if err := kube.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{labelJob}); err != nil {
			return false, err.Error()
		}
		return len(jobs.Items)+len(pods.Items)+len(cms.Items) == 0,
			fmt.Sprintf("%d jobs, %d pods, %d ConfigMaps", len(jobs.Items), len(pods.Items), len(cms.Items))
	})
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
		got, err := configstore.Recorded(ctx, kube, client.ObjectKeyFromObject(&cm), configKey)
		if err != nil {
			return false, err.Error()
		}
		return string(got) == config, "an earlier document is in force"
	})
}

// runPod runs a container from image on the node until the test ends.
func runPod(t *testing.T, node, name, image string) {
	t.Helper()
	ctx := testCtx(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			// The CRI-O nodes are tainted (isolateCRIONodes).
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), pod)
		eventually(t, 2*time.Minute, "pod "+name+" to be gone", func() (bool, string) {
			err := kube.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
	})
	eventually(t, 2*time.Minute, "pod "+name+" to run", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s", pod.Status.Phase)
	})
}

// seed imports images, each with its own content (so its own ID), into the
// nodes' runtimes.
func seed(t *testing.T, nodes []Node, tags ...string) {
	t.Helper()
	pause := testcontainerd.Pause(t)
	var imgs []testcontainerd.Image
	for _, tag := range tags {
		imgs = append(imgs, testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: 64 << 10})
	}
	importImages(t, nodes, imgs)
	for _, n := range nodes {
		expectImages(t, n, tags, nil)
	}
}

// goneFromEveryNode waits until no node has the image.
func goneFromEveryNode(t *testing.T, timeout time.Duration, what, image string) {
	t.Helper()
	eventually(t, timeout, what, func() (bool, string) {
		var left []string
		for _, n := range cluster.Nodes {
			if nodeImages(t, n)[image] {
				left = append(left, n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("still on %v", left)
	})
}

// importImages builds the images and imports them into every node's
// runtime as pulled images: with the repository digest of a pull, which the
// automatic policies may remove (imported_test.go).
func importImages(t *testing.T, nodes []Node, imgs []testcontainerd.Image) {
	t.Helper()
	importUnpulled(t, nodes, imgs)
	for _, n := range nodes {
		addRepoDigests(t, n, imgs)
	}
}

// seedAlpine imports Alpine-like images (an os-release and an apk
// database, as the fixture DB of the scanner module expects: Alpine 3.22)
// whose musl is at the given version, tag → version.
func seedAlpine(t *testing.T, nodes []Node, musl map[string]string) {
	t.Helper()
	var imgs []testcontainerd.Image
	for tag, version := range musl {
		imgs = append(imgs, testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{
			"etc/alpine-release":   []byte("3.22.1\n"),
			"lib/apk/db/installed": []byte("P:musl\nV:" + version + "\nA:x86_64\no:musl\n\n"),
			"etc/e2e-tag":          []byte(tag),
		}})
	}
	importImages(t, nodes, imgs)
}

func criClient(t *testing.T, n Node) *cri.Client {
	t.Helper()
	c, err := cri.Dial(testCtx(t), "unix://"+n.Socket, cri.DefaultTimeouts)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeImages lists the tags on the node, asking its runtime directly.
func nodeImages(t *testing.T, n Node) map[string]bool {
	t.Helper()
	imgs, err := criClient(t, n).ListImages(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	out := map[string]bool{}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			out[tag] = true
		}
	}
	return out
}

func nodeContainers(t *testing.T, n Node) []cri.Container {
	t.Helper()
	cs, err := criClient(t, n).ListContainers(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return cs
}

func expectImages(t *testing.T, n Node, present, absent []string) {
	t.Helper()
	have := nodeImages(t, n)
	for _, img := range present {
		if !have[img] {
			t.Errorf("%s: %s was removed; want it kept", n.Name, img)
		}
	}
	for _, img := range absent {
		if have[img] {
			t.Errorf("%s: %s is still there; want it removed", n.Name, img)
		}
	}
}

// eventually polls cond until it holds; on timeout it prints what the
// cluster holds and fails the test.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			dump(t)
			t.Fatalf("waiting %s for %s: %s", timeout, what, detail)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dump logs the state of Eraser's objects and the manager's last log lines.
func dump(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(namespace)); err == nil {
		for _, p := range pods.Items {
			var states []string
			for _, s := range p.Status.ContainerStatuses {
				states = append(states, fmt.Sprintf("%s=%+v", s.Name, s.State))
			}
			t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(states, " "))
		}
	}
	var jobs eraserv1.ImageJobList
	if err := kube.List(ctx, &jobs); err == nil {
		for _, j := range jobs.Items {
			t.Logf("ImageJob %s: %+v", j.Name, j.Status)
		}
	}
	logs, err := clientset.CoreV1().Pods(namespace).GetLogs(managerPod(ctx), &corev1.PodLogOptions{TailLines: ptr.To[int64](40)}).DoRaw(ctx)
	if err == nil {
		t.Logf("manager log (last lines):\n%s", logs)
	}
}

// managerMetrics reads the manager's Prometheus endpoint at its pod's IP
// (the nodes' pod networks are bridges on this host).
func managerMetrics(ctx context.Context) (string, error) {
	pod := managerPodObject(ctx)
	if pod == nil || pod.Status.PodIP == "" {
		return "", errors.New("no manager pod with an IP")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(pod.Status.PodIP, "8889")+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func managerPod(ctx context.Context) string {
	if pod := managerPodObject(ctx); pod != nil {
		return pod.Name
	}
	return ""
}

func managerPodObject(ctx context.Context) *corev1.Pod {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}
