//go:build linux

package kubelet

// The disk-pressure scenario of TestEraser: a scheduled run that frees
// the image filesystem down to its low threshold.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

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
	var imgs []testimage.Image
	pause := testimage.Pause(t)
	for i := range fillers {
		tag := fmt.Sprintf("example.com/fill/%d:1", i)
		tags = append(tags, tag)
		imgs = append(imgs, testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause},
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
	// The policy may also take an image an earlier scenario left unused
	// and older than the fillers (the scanner's, once its run is over):
	// the job counts at least the fillers gone.
	if int64(removed) > dp.Removed {
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
