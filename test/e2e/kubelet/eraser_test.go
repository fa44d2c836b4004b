//go:build linux

package kubelet

import (
	"strings"
	"testing"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

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

	t.Run("ScheduledRunWithTrivyScanner", scheduledScanOneDBPerCluster)

	t.Run("ScheduledDiskPressureRunAndDryRun", func(t *testing.T) {
		diskPressure(t)
	})

	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) {
		uninstall(t, objects)
	})
}
