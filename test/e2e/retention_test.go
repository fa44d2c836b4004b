//go:build linux

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
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
	n := seed(t)
	ctx := context.Background()
	state := "--state-dir=" + t.TempDir()
	// The workers' default minimum age (10m), not the tests' 0s.
	minAge := "--min-age=10m"

	r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.Endpoint, state, minAge)
	if r.Code != 0 || r.Summary.Counts["removed"] != 0 || r.Summary.Counts["too young"] < 6 || r.Summary.AgeSource != "runtime" {
		t.Fatalf(`"*": exit %d, summary %+v\n%s`, r.Code, r.Summary, r.Stderr)
	}
	if !n.present(t)[junkA] {
		t.Fatal(`"*" removed a fresh image`)
	}

	_, rm := scheduled(t, ctx, n.Endpoint, []string{state, minAge})
	if rm.Summary.Counts["removed"] != 0 || rm.Summary.Counts["too young"] < 6 {
		t.Fatalf("scheduled run: summary %+v\n%s", rm.Summary, rm.Stderr)
	}

	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, junkA), "--runtime-endpoint="+n.Endpoint, state, minAge)
	if r.Code != 0 || r.Summary.RemovedBy["Listed"].Images != 1 || n.present(t)[junkA] {
		t.Fatalf("named: exit %d, summary %+v, present %v\n%s", r.Code, r.Summary, n.present(t), r.Stderr)
	}

	r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.Endpoint, state, minAge,
		rfc3339(time.Now().Add(11*time.Minute)))
	if r.Code != 0 || r.Summary.Counts["too young"] != 0 || r.Summary.RemovedBy["Unused"].Images < 5 || n.present(t)[junkB] {
		t.Fatalf(`"*" 11 minutes later: exit %d, summary %+v\n%s`, r.Code, r.Summary, r.Stderr)
	}
	if !n.present(t)[runImage] || !n.present(t)[exitedImage] {
		t.Fatal("an image a container uses was removed")
	}
}

// TestUnusedForAcrossRuns: a use seen at one run outlives the container
// (removed, as the kubelet's garbage collection does) and is what the
// policy judges at the next runs; a node with no history starts its clock
// at its first run.
func TestUnusedForAcrossRuns(t *testing.T) {
	n := seed(t)
	ctx := context.Background()
	pod, _ := n.RunContainer(t, "job", appImage)
	day0 := time.Now().Add(time.Hour)
	policy := []string{"--state-dir=" + t.TempDir(), "--min-age=1m", "--unused-for=720h"}
	at := func(days int) []string {
		return append([]string{rfc3339(day0.Add(time.Duration(days) * 24 * time.Hour))}, policy...)
	}

	_, rm := scheduled(t, ctx, n.Endpoint, at(0))
	if rm.Summary.Counts["removed"] != 0 || rm.Summary.Counts["recently used"] < 6 {
		t.Fatalf("day 0: %+v\n%s", rm.Summary, rm.Stderr)
	}
	n.RemovePod(t, pod)

	_, rm = scheduled(t, ctx, n.Endpoint, at(20))
	if rm.Summary.Counts["removed"] != 0 {
		t.Fatalf("day 20 removed images: %+v\n%s", rm.Summary, rm.Stderr)
	}
	// The app image was seen in use on day 0: with its container gone it
	// is a candidate now, used 20 days ago.
	if !n.present(t)[appImage] {
		t.Fatal("day 20: the app image is gone")
	}

	_, rm = scheduled(t, ctx, n.Endpoint, at(31))
	got := n.present(t)
	if got[appImage] || got[junkA] || rm.Summary.RemovedBy["UnusedFor"].Images < 6 {
		t.Fatalf("day 31: present %v, summary %+v\n%s", got, rm.Summary, rm.Stderr)
	}
	if !got[runImage] || !got[exitedImage] {
		t.Fatalf("day 31: an image a container uses was removed: %v", got)
	}
}

// diskNode is a runtime whose image store is on a small filesystem the
// test fills: containerd's root or CRI-O's store on a tmpfs.
type diskNode struct {
	endpoint string
	root     string
	// args are the runtime's own worker flags (CRI-O: its image store).
	args    []string
	importI func(testcontainerd.Image)
	present func() map[string]bool
}

// TestDiskPressure: containerd's root on a small tmpfs filled with real
// images; a scheduled run with only the thresholds removes least recently
// pulled first until below the low threshold, and stops; run again below
// the high threshold, it removes nothing. Its dry run removes nothing.
func TestDiskPressure(t *testing.T) {
	n := &node{Containerd: testcontainerd.StartSmallDisk(t, 96)}
	diskPressure(t, diskNode{endpoint: n.Endpoint, root: n.RootDir(),
		importI: func(img testcontainerd.Image) { n.Import(t, img) }, present: func() map[string]bool { return n.present(t) }})
}

func diskPressure(t *testing.T, n diskNode) {
	ctx := context.Background()
	var tags []string
	for i := range 10 {
		tag := fmt.Sprintf("example.com/fill/%d:1", i)
		tags = append(tags, tag)
		// One import at a time: each arrives after the one before.
		n.importI(testcontainerd.Image{Tags: []string{tag}, RandomBytes: 3 << 20})
	}
	usage := func() diskusage.Usage {
		u, err := diskusage.Stat(n.root)
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
	policy := append([]string{"--state-dir=" + t.TempDir(), "--min-age=0s", fmt.Sprintf("--high-threshold-percent=%d", high), fmt.Sprintf("--low-threshold-percent=%d", low)}, n.args...)

	_, dry := scheduled(t, ctx, n.endpoint, policy, "--dry-run")
	if dry.Summary.RemovedBy["DiskPressure"].Images == 0 || !dry.Summary.DryRun {
		t.Fatalf("dry run: %+v\n%s", dry.Summary, dry.Stderr)
	}
	for _, tag := range tags {
		if !n.present()[tag] {
			t.Fatalf("the dry run removed %s", tag)
		}
	}
	// The runtime's own databases live there too and may move a page.
	if u := usage(); u.Used()+1<<20 < before.Used() {
		t.Fatalf("the dry run freed space: %d -> %d bytes used", before.Used(), u.Used())
	}

	_, rm := scheduled(t, ctx, n.endpoint, policy)
	after := usage()
	fs := rm.Summary.ImageFs
	if fs == nil || fs.CapacityBytes != before.Capacity || fs.UsedAfterBytes*100 >= fs.CapacityBytes*uint64(low) {
		t.Fatalf("summary's imageFs %+v, want below %d%% after\n%s", fs, low, rm.Stderr)
	}
	if after.Percent() >= float64(low) {
		t.Fatalf("image filesystem at %.1f%% after the run, want below %d%%", after.Percent(), low)
	}
	present := n.present()
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

	_, again := scheduled(t, ctx, n.endpoint, policy)
	if again.Summary.Counts["removed"] != 0 || again.Summary.Counts["not needed"] == 0 {
		t.Fatalf("below the high threshold: %+v\n%s", again.Summary, again.Stderr)
	}
}
