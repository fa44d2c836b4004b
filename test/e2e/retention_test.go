//go:build linux

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// scheduled runs a scheduled run's collector and remover (no scanner),
// both with args, as a worker pod passes them, the remover with
// removerArgs too, and fails the test unless both exit 0.
func scheduled(t *testing.T, ctx context.Context, endpoint string, args []string, removerArgs ...string) (collector, remover run) {
	t.Helper()
	// A worker whose peer died must not hold the test for the default hour.
	common := append([]string{"--runtime-endpoint=" + endpoint, "--shared-dir=" + t.TempDir(), "--handoff-timeout=1m"}, args...)
	var wg sync.WaitGroup
	wg.Go(func() { collector = runWorker(t, ctx, "collector", append(common, "--scan-disabled")...) })
	// A fresh slice: appending to common in place would race with the
	// collector's arguments, which share its backing array.
	remover = runWorker(t, ctx, "remover", append(append(append([]string{}, common...), "--scanner=disabled"), removerArgs...)...)
	wg.Wait()
	if collector.Code != 0 || remover.Code != 0 {
		t.Fatalf("collector exit %d, remover exit %d\ncollector:\n%s\nremover:\n%s", collector.Code, remover.Code, collector.Stderr, remover.Stderr)
	}
	return collector, remover
}

func rfc3339(t time.Time) string { return "--now=" + t.UTC().Format(time.RFC3339) }

// TestMinimumAge: images imported seconds ago are kept by "*" and by a
// scheduled run under the default minimum age, removed when an ImageList
// names them, and removed by "*" once the (pinned) clock says they are old.
func TestMinimumAge(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx := context.Background()
		endpoint := "--runtime-endpoint=" + n.CRIEndpoint()
		// The workers' default minimum age (10m), not the tests' 0s.
		policy := n.workerArgs("--state-dir="+t.TempDir(), "--min-age=10m")
		remover := func(args ...string) run {
			return runWorker(t, ctx, "remover", append(append([]string{endpoint}, policy...), args...)...)
		}

		r := remover("--imagelist=" + imageListFile(t, "*"))
		if r.Code != 0 || r.Summary.Counts["removed"] != 0 || r.Summary.Counts["too young"] < 6 || r.Summary.AgeSource != "runtime" {
			t.Fatalf(`"*": exit %d, summary %+v\n%s`, r.Code, r.Summary, r.Stderr)
		}
		if !n.present(t)[junkA] {
			t.Fatal(`"*" removed a fresh image`)
		}

		_, rm := scheduled(t, ctx, n.CRIEndpoint(), policy)
		if rm.Summary.Counts["removed"] != 0 || rm.Summary.Counts["too young"] < 6 {
			t.Fatalf("scheduled run: summary %+v\n%s", rm.Summary, rm.Stderr)
		}

		r = remover("--imagelist=" + imageListFile(t, junkA))
		if r.Code != 0 || r.Summary.RemovedBy["Listed"].Images != 1 || n.present(t)[junkA] {
			t.Fatalf("named: exit %d, summary %+v, present %v\n%s", r.Code, r.Summary, n.present(t), r.Stderr)
		}

		r = remover("--imagelist="+imageListFile(t, "*"), rfc3339(time.Now().Add(11*time.Minute)))
		if r.Code != 0 || r.Summary.Counts["too young"] != 0 || r.Summary.RemovedBy["Unused"].Images < 5 || n.present(t)[junkB] {
			t.Fatalf(`"*" 11 minutes later: exit %d, summary %+v\n%s`, r.Code, r.Summary, r.Stderr)
		}
		if !n.present(t)[runImage] || !n.present(t)[exitedImage] || !n.present(t)[createdImage] {
			t.Fatal("an image a container uses was removed")
		}
	})
}

// TestUnusedForAcrossRuns: a use seen at one run outlives the container
// (removed, as the kubelet's garbage collection does) and is what the
// policy judges at the next runs; a node with no history starts its clock
// at its first run.
func TestUnusedForAcrossRuns(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx := context.Background()
		pod, _ := n.RunContainer(t, "job", appImage)
		day0 := time.Now().Add(time.Hour)
		policy := n.workerArgs("--state-dir="+t.TempDir(), "--min-age=1m", "--unused-for=720h",
			"--exclusion-dir="+workertest.ExclusionDir(t, keepExact, "example.com/protected/*"))
		at := func(days int) []string {
			return append([]string{rfc3339(day0.Add(time.Duration(days) * 24 * time.Hour))}, policy...)
		}

		// Junk a-d and the short-named image; app is in use.
		_, rm := scheduled(t, ctx, n.CRIEndpoint(), at(0))
		if rm.Summary.Counts["removed"] != 0 || rm.Summary.Counts["recently used"] != n.removable-1 || rm.Summary.AgeSource != "runtime" {
			t.Fatalf("day 0: %+v\n%s", rm.Summary, rm.Stderr)
		}
		n.RemovePod(t, pod)

		_, rm = scheduled(t, ctx, n.CRIEndpoint(), at(20))
		if rm.Summary.Counts["removed"] != 0 {
			t.Fatalf("day 20 removed images: %+v\n%s", rm.Summary, rm.Stderr)
		}
		// The app image was seen in use on day 0: with its container gone it
		// is a candidate now, used 20 days ago.
		if !n.present(t)[appImage] {
			t.Fatal("day 20: the app image is gone")
		}

		_, rm = scheduled(t, ctx, n.CRIEndpoint(), at(31))
		got := n.present(t)
		if got[appImage] || got[junkA] || rm.Summary.RemovedBy["UnusedFor"].Images < n.removable {
			t.Fatalf("day 31: present %v, summary %+v\n%s", got, rm.Summary, rm.Stderr)
		}
		for image := range n.kept {
			if !got[image] {
				t.Errorf("day 31: %s, which is protected, was removed", image)
			}
		}
	})
}

// TestDiskPressure: the image filesystem on a small tmpfs filled with real
// images; a scheduled run with only the thresholds removes least recently
// pulled first until below the low threshold, and stops; run again below
// the high threshold, it removes nothing. Its dry run removes nothing. The
// runtime reports its image filesystem where the workers measure it.
func TestDiskPressure(t *testing.T) {
	noderuntime.EachNode(t, noderuntime.Options{SmallDiskMiB: 48}, func(t *testing.T, rt noderuntime.Runtime, n noderuntime.Node) {
		diskPressure(t, &workerNode{Node: n, rt: rt})
	})
}

func diskPressure(t *testing.T, n *workerNode) {
	ctx := context.Background()
	var tags []string
	for i := range 10 {
		tag := fmt.Sprintf("example.com/fill/%d:1", i)
		tags = append(tags, tag)
		// One import at a time: each arrives after the one before.
		n.Import(t, testimage.Image{Tags: []string{tag}, RandomBytes: 3 << 20})
	}
	usage := func() diskusage.Usage {
		u, err := diskusage.Stat(n.RootDir())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	before := usage()
	high := int(before.Percent())
	low := high - 25
	t.Logf("image filesystem %.1f%% used of %d MiB: high %d%%, low %d%%", before.Percent(), before.Capacity>>20, high, low)
	if low < 10 {
		t.Fatalf("the images fill too little of the tmpfs (%.1f%%) for the test", before.Percent())
	}
	policy := n.workerArgs("--state-dir="+t.TempDir(), "--min-age=0s", fmt.Sprintf("--high-threshold-percent=%d", high), fmt.Sprintf("--low-threshold-percent=%d", low))
	endpoint := n.CRIEndpoint()
	_, dry := scheduled(t, ctx, endpoint, policy, "--dry-run")
	if dry.Summary.RemovedBy["DiskPressure"].Images == 0 || !dry.Summary.DryRun {
		t.Fatalf("dry run: %+v\n%s", dry.Summary, dry.Stderr)
	}
	for _, tag := range tags {
		if !n.present(t)[tag] {
			t.Fatalf("the dry run removed %s", tag)
		}
	}
	// The runtime's own databases live there too and may move a page.
	if u := usage(); u.Used()+1<<20 < before.Used() {
		t.Fatalf("the dry run freed space: %d -> %d bytes used", before.Used(), u.Used())
	}

	_, rm := scheduled(t, ctx, endpoint, policy)
	after := usage()
	fs := rm.Summary.ImageFs
	if fs == nil || fs.CapacityBytes != before.Capacity || fs.UsedAfterBytes*100 >= fs.CapacityBytes*uint64(low) {
		t.Fatalf("summary's imageFs %+v, want below %d%% after\n%s", fs, low, rm.Stderr)
	}
	if after.Percent() >= float64(low) {
		t.Fatalf("image filesystem at %.1f%% after the run, want below %d%%", after.Percent(), low)
	}
	present := n.present(t)
	removed := 0
	for i, tag := range tags {
		if present[tag] {
			// LRU first: once one is kept, every younger one is too.
			for _, younger := range tags[i+1:] {
				if !present[younger] {
					t.Fatalf("%s removed while the older %s was kept: not least recently used first (present %v)", younger, tag, present)
				}
			}
			break
		}
		removed++
	}
	if removed == 0 || removed == len(tags) || rm.Summary.RemovedBy["DiskPressure"].Images != removed {
		t.Fatalf("removed %d of %d (summary %+v): want some, not all\n%s", removed, len(tags), rm.Summary, rm.Stderr)
	}
	if rm.Summary.Counts["not needed"] < len(tags)-removed {
		t.Errorf("kept %d as not needed, want at least %d: %+v", rm.Summary.Counts["not needed"], len(tags)-removed, rm.Summary.Counts)
	}
	t.Logf("removed %d of %d; %.1f%% -> %.1f%%", removed, len(tags), before.Percent(), after.Percent())

	_, again := scheduled(t, ctx, endpoint, policy)
	if again.Summary.Counts["removed"] != 0 || again.Summary.Counts["not needed"] == 0 {
		t.Fatalf("below the high threshold: %+v\n%s", again.Summary, again.Stderr)
	}
}
