//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// reliefDiskMiB is the image filesystem's size (times the runtime's layer
// copies), and reliefImages the images that fill it, of 1, 2 and 3 MiB.
const (
	reliefDiskMiB = 96
	reliefImages  = 24
)

// TestDiskPressureStopsWithinOneImage: a tmpfs image filesystem filled,
// above the high threshold, with images of known sizes pulled through CRI
// from a registry on loopback. A scheduled run with thresholds stops as
// soon as the measured filesystem is below the low threshold: below it
// after the run, and not below it with the last image it removed still
// there (what that image's pull added, measured the same way). The summary's imageFs has the target,
// reached, and the time and bytes it took.
func TestDiskPressureStopsWithinOneImage(t *testing.T) {
	noderuntime.Each(t, func(t *testing.T, rt noderuntime.Runtime) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		n, pull := reliefNode(t, rt)
		usage := func() diskusage.Usage {
			u, err := diskusage.Stat(n.RootDir())
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		var tags []string
		footprint := map[string]uint64{} // what each pull added, measured
		for i := range reliefImages {
			before := usage().Used()
			// One at a time: each arrives after the one before.
			tag := pull(t, ctx, testimage.Image{Tags: []string{fmt.Sprintf("example.com/relief/%d:1", i)}, RandomBytes: (1 + i%3) << 20})
			tags = append(tags, tag)
			footprint[tag] = usage().Used() - min(before, usage().Used())
		}
		before := usage()
		high := int(before.Percent())
		low := high - 20
		if low < 10 {
			t.Fatalf("the images fill too little of the tmpfs (%.1f%%) for the test", before.Percent())
		}
		target := before.Capacity * uint64(low) / 100
		t.Logf("image filesystem %.1f%% used of %d MiB: high %d%%, low %d%% (target %d bytes)",
			before.Percent(), before.Capacity>>20, high, low, target)
		tagOf := map[string]string{}
		for ref, id := range n.ImageIDs(t) {
			if footprint[ref] > 0 || slices.Contains(tags, ref) {
				tagOf[id] = ref
			}
		}

		policy := append([]string{"--state-dir=" + t.TempDir(), "--min-age=0s", fmt.Sprintf("--high-threshold-percent=%d", high), fmt.Sprintf("--low-threshold-percent=%d", low)},
			rt.WorkerArgs(n)...)
		_, rm := scheduled(t, ctx, n.CRIEndpoint(), policy)
		after := usage()

		// The images removed, in the order the run removed them (its
		// result lines): which goes first is the policy's order.
		entries, _, err := nodereport.ParseLog(strings.NewReader(rm.Stderr), 1000)
		if err != nil {
			t.Fatal(err)
		}
		var removed []string
		for _, e := range entries {
			if e.Outcome == "removed" {
				if e.Policy != "DiskPressure" || tagOf[e.ID] == "" {
					t.Fatalf("removed %s (%s) for %s: want only the test's images, for disk pressure", e.Image, e.ID, e.Policy)
				}
				removed = append(removed, tagOf[e.ID])
			}
		}
		present := map[string]bool{}
		for ref := range n.ImageIDs(t) {
			present[ref] = true
		}
		for _, tag := range removed {
			if present[tag] {
				t.Errorf("%s reported removed is still on the node", tag)
			}
		}
		if len(removed) == 0 || len(removed) == len(tags) {
			t.Fatalf("removed %d of %d images: want some, not all\n%s", len(removed), len(tags), rm.Stderr)
		}
		// How many, in the run's order, their pulls say were needed.
		needed, sum := 0, uint64(0)
		for _, tag := range removed {
			if before.Used()-sum < target {
				break
			}
			sum += footprint[tag]
			needed++
		}
		last := removed[len(removed)-1]
		t.Logf("removed %d of %d (their pulls say %d were needed); used %d -> %d bytes, target %d; the last removed image's pull added %d",
			len(removed), len(tags), needed, before.Used(), after.Used(), target, footprint[last])
		if after.Used() >= target {
			t.Errorf("used %d bytes after the run, at or above the target %d\n%s", after.Used(), target, rm.Stderr)
		}
		if after.Used()+footprint[last] < target {
			t.Errorf("used %d bytes after the run: without removing %s (%d bytes) it would have been below the target %d too; the run went past it by more than one image\n%s",
				after.Used(), last, footprint[last], target, rm.Stderr)
		}

		fs := rm.Summary.ImageFs
		if fs == nil {
			t.Fatalf("no imageFs in the summary\n%s", rm.Stderr)
		}
		t.Logf("summary's imageFs: %+v", *fs)
		if fs.TargetBytes != target || !fs.TargetReached || fs.UsedAfterBytes >= target {
			t.Errorf("imageFs %+v: want the target %d, reached", *fs, target)
		}
		// What the drain measured freed is what the filesystem shows, give
		// or take the runtime's own writes around it (its database pages).
		freed := before.Used() - after.Used()
		if fs.FreedToTargetBytes == 0 || diff(fs.FreedToTargetBytes, freed) > 1<<20 {
			t.Errorf("freedToTargetBytes %d, the filesystem shows %d freed", fs.FreedToTargetBytes, freed)
		}
		if fs.TimeToTargetMs <= 0 {
			t.Errorf("timeToTargetMs %v, want the time it took", fs.TimeToTargetMs)
		}
		if n := strings.Count(rm.Stderr, "disk pressure: the image filesystem is below the target"); n != 1 {
			t.Errorf("the remover said %d times that the target was reached, want once\n%s", n, rm.Stderr)
		}
		if got := rm.Summary.RemovedBy["DiskPressure"].Images; got != len(removed) {
			t.Errorf("summary removed %d for disk pressure, the log %d images", got, len(removed))
		}
	})
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}

// reliefNode starts a node of rt with a small image filesystem, and how to
// pull an image of one tag onto it through CRI from a registry on
// loopback, which returns the name the runtime lists it by.
func reliefNode(t *testing.T, rt noderuntime.Runtime) (noderuntime.Node, func(*testing.T, context.Context, testimage.Image) string) {
	t.Helper()
	if rt.Name != "containerd" {
		// CRI-O's Import pushes to its own loopback registry and pulls
		// through CRI.
		n := rt.Start(t, noderuntime.Options{SmallDiskMiB: reliefDiskMiB})
		return n, func(t *testing.T, _ context.Context, img testimage.Image) string {
			t.Helper()
			n.Import(t, img)
			return img.Tags[0]
		}
	}
	host := testregistry.Start(t)
	c := testcontainerd.Start(t, testcontainerd.WithSmallDisk(reliefDiskMiB*rt.LayerCopies), testcontainerd.WithPlainHTTPRegistries(host))
	return noderuntime.OfContainerd(c), func(t *testing.T, ctx context.Context, img testimage.Image) string {
		t.Helper()
		built, err := img.Build()
		if err != nil {
			t.Fatal(err)
		}
		tag := img.Tags[0]
		if err := testregistry.Push(host, tag, built); err != nil {
			t.Fatalf("pushing %s: %v", tag, err)
		}
		ref := host + "/" + tag
		if _, err := c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		return ref
	}
}
