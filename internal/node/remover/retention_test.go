package remover

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// timedRuntime is a fake runtime that records when each image arrived, as
// containerd's image records do.
type timedRuntime struct {
	*fakeRuntime
	times map[string]time.Time
}

func (r timedRuntime) ImageTimes(context.Context) (map[string]time.Time, error) { return r.times, nil }

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// stateDir is a fresh state directory (not t.TempDir: this package runs
// under Wine too).
func stateDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func handed(ids ...string) []imageref.Ref {
	var out []imageref.Ref
	for _, s := range ids {
		r, err := imageref.Parse(s)
		if err != nil {
			panic(err)
		}
		out = append(out, r)
	}
	return out
}

// TestMinimumAge: "*" keeps what arrived under minAge ago; naming the image
// removes it anyway.
func TestMinimumAge(t *testing.T) {
	rt := timedRuntime{
		fakeRuntime: &fakeRuntime{images: []cri.Image{alpine, nginx, redis}},
		times: map[string]time.Time{
			alpine.ID:             t0.Add(-time.Hour),
			"quay.io/org/redis:7": t0.Add(-time.Minute), // re-tagged a minute ago
			redis.ID:              t0.Add(-48 * time.Hour),
			nginx.Digests[0]:      t0.Add(-5 * time.Minute),
		},
	}
	targets, _ := ParseTargets([]string{"*", "docker.io/library/nginx:1.27"})
	results, err := Run(context.Background(), rt, targets, Options{
		Retention: retention.Settings{MinAge: 10 * time.Minute}, Now: t0, StateDir: stateDir(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []outcome{
		{"docker.io/library/nginx:1.27", nginx.ID, workerresult.Removed},
		{alpine.ID, alpine.ID, workerresult.Removed},
		{redis.ID, redis.ID, workerresult.TooYoung},
	}
	if diff := cmp.Diff(want, outcomes(results)); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	s := Summarize(results, false)
	wantBy := map[string]workerresult.PolicyTotal{"Listed": {Images: 1, Bytes: 200}, "Unused": {Images: 1, Bytes: 100}}
	if diff := cmp.Diff(wantBy, s.RemovedBy); diff != "" {
		t.Errorf("removedBy (-want +got):\n%s", diff)
	}
}

// TestNoRuntimeTimes: a runtime that keeps no pull times ages images from
// when the state file first saw them: first sight keeps them all.
func TestNoRuntimeTimes(t *testing.T) {
	dir := stateDir(t)
	rt := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	targets, _ := ParseTargets([]string{"*"})
	opts := Options{Retention: retention.Settings{MinAge: time.Hour}, Now: t0, StateDir: dir, Info: &RunInfo{}}
	results, err := Run(context.Background(), rt, targets, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]outcome{{alpine.ID, alpine.ID, workerresult.TooYoung}, {nginx.ID, nginx.ID, workerresult.TooYoung}}, outcomes(results)); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	if opts.Info.AgeSource != AgeFirstSeen {
		t.Errorf("age source %q, want %q", opts.Info.AgeSource, AgeFirstSeen)
	}
	opts.Now = t0.Add(2 * time.Hour)
	results, err = Run(context.Background(), rt, targets, opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]outcome{{alpine.ID, alpine.ID, workerresult.Removed}, {nginx.ID, nginx.ID, workerresult.Removed}}, outcomes(results)); diff != "" {
		t.Errorf("two hours later (-want +got):\n%s", diff)
	}
}

// TestUnusedForAcrossRuns: use seen at one run survives the container's
// garbage collection; an image first seen at the first run is judged from
// then.
func TestUnusedForAcrossRuns(t *testing.T) {
	dir := stateDir(t)
	rt := timedRuntime{
		fakeRuntime: &fakeRuntime{images: []cri.Image{alpine, nginx, redis}, containers: []cri.Container{running("web", "docker.io/library/nginx:1.27")}},
		times:       map[string]time.Time{alpine.ID: t0.Add(-90 * 24 * time.Hour), nginx.ID: t0.Add(-90 * 24 * time.Hour), redis.ID: t0.Add(-90 * 24 * time.Hour)},
	}
	collected := []string{alpine.ID, nginx.ID, redis.ID}
	run := func(now time.Time) []outcome {
		t.Helper()
		results, err := Run(context.Background(), rt, Targets{Scheduled: true, Collected: collected}, Options{
			Retention: retention.Settings{MinAge: time.Minute, UnusedFor: 30 * 24 * time.Hour}, Now: now, StateDir: dir,
		})
		if err != nil {
			t.Fatal(err)
		}
		return outcomes(results)
	}
	// First run: no history, nothing is known to be unused for 30 days.
	want := []outcome{{alpine.ID, alpine.ID, workerresult.RecentlyUsed}, {nginx.ID, nginx.ID, workerresult.InUse}, {redis.ID, redis.ID, workerresult.RecentlyUsed}}
	if diff := cmp.Diff(want, run(t0)); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	// The container is garbage-collected; 20 days later nginx was used 20
	// days ago, the others are unused for 20 days.
	rt.containers = nil
	want = []outcome{{alpine.ID, alpine.ID, workerresult.RecentlyUsed}, {nginx.ID, nginx.ID, workerresult.RecentlyUsed}, {redis.ID, redis.ID, workerresult.RecentlyUsed}}
	if diff := cmp.Diff(want, run(t0.Add(20*24*time.Hour))); diff != "" {
		t.Errorf("day 20 (-want +got):\n%s", diff)
	}
	// Day 31: alpine and redis were unused since the first run; nginx
	// since day 0 too (its last use was seen then).
	want = []outcome{{alpine.ID, alpine.ID, workerresult.Removed}, {nginx.ID, nginx.ID, workerresult.Removed}, {redis.ID, redis.ID, workerresult.Removed}}
	if diff := cmp.Diff(want, run(t0.Add(31*24*time.Hour))); diff != "" {
		t.Errorf("day 31 (-want +got):\n%s", diff)
	}
}

// TestScannerRunPolicies: the scanner's choice is Vulnerable; the images it
// did not hand over are not the remover's to report unless another policy
// considers them.
func TestScannerRunPolicies(t *testing.T) {
	rt := timedRuntime{
		fakeRuntime: &fakeRuntime{images: []cri.Image{alpine, nginx, redis}},
		times:       map[string]time.Time{alpine.ID: t0.Add(-time.Hour), nginx.ID: t0.Add(-time.Hour), redis.ID: t0.Add(-time.Second)},
	}
	targets := Targets{Scheduled: true, Scanned: true, Collected: []string{alpine.ID, nginx.ID, redis.ID}, Handed: handed(alpine.ID, redis.ID)}
	results, err := Run(context.Background(), rt, targets, Options{Retention: retention.Settings{MinAge: time.Minute}, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]outcome{{alpine.ID, alpine.ID, workerresult.Removed}, {redis.ID, redis.ID, workerresult.TooYoung}}, outcomes(results)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if results[len(results)-1].Policy != retention.Vulnerable {
		t.Errorf("policy %q, want Vulnerable", results[len(results)-1].Policy)
	}
}

// shrinkingDisk is a filesystem that frees half of each removed image's
// size: layers shared with kept images stay.
type shrinkingDisk struct {
	rt       *fakeRuntime
	capacity uint64
	used     uint64
	sizes    map[string]uint64
	measured int
	// stuck, when set, is the usage measured whatever is removed.
	stuck func(*shrinkingDisk) uint64
}

func (d *shrinkingDisk) measure(context.Context) (retention.Disk, error) {
	d.measured++
	if d.stuck != nil {
		return retention.Disk{Capacity: d.capacity, Available: d.capacity - d.stuck(d)}, nil
	}
	used := d.used
	d.rt.mu.Lock()
	for _, id := range d.rt.removed {
		used -= d.sizes[id] / 2
	}
	d.rt.mu.Unlock()
	return retention.Disk{Capacity: d.capacity, Available: d.capacity - used}, nil
}

// diskRun runs a scheduled run with thresholds 85/80 on ten images of size
// bytes, oldest first, on a shrinkingDisk of 1000 bytes with used in use.
func diskRun(t *testing.T, size, used uint64) (workerresult.Summary, *fakeRuntime) {
	t.Helper()
	return diskRunWith(t, size, used, nil)
}

// diskRunOn is diskRun on a disk whose usage stuck gives.
func diskRunOn(t *testing.T, size uint64, stuck func(*shrinkingDisk) uint64) (workerresult.Summary, *fakeRuntime) {
	t.Helper()
	return diskRunWith(t, size, stuck(nil), stuck)
}

func diskRunWith(t *testing.T, size, used uint64, stuck func(*shrinkingDisk) uint64) (workerresult.Summary, *fakeRuntime) {
	t.Helper()
	times := map[string]time.Time{}
	sizes := map[string]uint64{}
	fake := &fakeRuntime{}
	var collected []string
	for i := range 10 {
		img := cri.Image{ID: id("0123456789"[i]), Size: size}
		fake.images = append(fake.images, img)
		times[img.ID] = t0.Add(-time.Duration(100-i) * time.Hour) // image 0 oldest
		sizes[img.ID] = size
		collected = append(collected, img.ID)
	}
	disk := &shrinkingDisk{rt: fake, capacity: 1000, used: used, sizes: sizes, stuck: stuck}
	info := &RunInfo{}
	results, err := Run(context.Background(), timedRuntime{fakeRuntime: fake, times: times}, Targets{Scheduled: true, Collected: collected}, Options{
		Retention: retention.Settings{MinAge: time.Minute, HighThresholdPercent: 85, LowThresholdPercent: 80},
		Now:       t0, MeasureDisk: disk.measure, Info: info,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(results, false)
	info.Apply(&s)
	if len(results) != 10 {
		t.Errorf("%d results for 10 images: an image is reported twice or not at all", len(results))
	}
	return s, fake
}

// TestDiskPressureDrains: removals free half their size; the policy
// measures after each batch and goes on down the queue.
func TestDiskPressureDrains(t *testing.T) {
	// 900 used, under 800 wanted: 101 to free. The first batch, sized at
	// the first ratio (4), takes 3, which free 15: 885. The measured 0.5
	// is below the assumed 2: 86 more need 5, which free 25: 860; the 2
	// left free 10: 850, still above 80%, and nothing left to remove.
	s, fake := diskRun(t, 10, 900)
	if s.Counts["removed"] != 10 || s.RemovedBy["DiskPressure"].Images != 10 {
		t.Errorf("counts %v, removedBy %v", s.Counts, s.RemovedBy)
	}
	if s.ImageFs == nil || s.ImageFs.UsedBeforeBytes != 900 || s.ImageFs.UsedAfterBytes != 850 || s.ImageFs.CapacityBytes != 1000 {
		t.Errorf("imageFs %+v", s.ImageFs)
	}
	// The first chosen is the least recently arrived.
	if fake.removed[0] != fake.images[0].ID {
		t.Errorf("first removed %s, want the oldest %s", fake.removed[0], fake.images[0].ID)
	}
}

// TestDiskPressureStopsBelowLow: batches follow the freed ratio measured,
// and the policy stops once below the low threshold.
func TestDiskPressureStopsBelowLow(t *testing.T) {
	// 860 used, 61 to free, each image freeing 10 of its 20: at the first
	// ratio (4) one image covers the need: 850. At the assumed 2, 51 more
	// need 2: 830; then one at a time: 820, 810, 800 (not below 800), 790.
	s, _ := diskRun(t, 20, 860)
	if s.Counts["removed"] != 7 || s.Counts["not needed"] != 3 {
		t.Errorf("counts %v", s.Counts)
	}
	if s.ImageFs.UsedAfterBytes != 790 {
		t.Errorf("used after %d, want 790", s.ImageFs.UsedAfterBytes)
	}
}

// TestDiskPressureBelowThreshold: a node below the high threshold removes
// nothing; a dry run plans what a run would do.
func TestDiskPressureBelowThreshold(t *testing.T) {
	fake := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	rt := timedRuntime{fakeRuntime: fake, times: map[string]time.Time{alpine.ID: t0.Add(-time.Hour), nginx.ID: t0.Add(-2 * time.Hour)}}
	targets := Targets{Scheduled: true, Collected: []string{alpine.ID, nginx.ID}}
	settings := retention.Settings{MinAge: time.Minute, HighThresholdPercent: 85, LowThresholdPercent: 80}
	at := func(used uint64) func(context.Context) (retention.Disk, error) {
		return func(context.Context) (retention.Disk, error) {
			return retention.Disk{Capacity: 1000, Available: 1000 - used}, nil
		}
	}
	results, err := Run(context.Background(), rt, targets, Options{Retention: settings, Now: t0, MeasureDisk: at(849)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]outcome{{alpine.ID, alpine.ID, workerresult.NotNeeded}, {nginx.ID, nginx.ID, workerresult.NotNeeded}}, outcomes(results)); diff != "" || len(fake.removed) > 0 {
		t.Errorf("below the threshold (-want +got):\n%s\nremoved %v", diff, fake.removed)
	}
	results, err = Run(context.Background(), rt, targets, Options{Retention: settings, Now: t0, MeasureDisk: at(850), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	// 850 used: the older nginx (200) brings it to 650.
	if diff := cmp.Diff([]outcome{{alpine.ID, alpine.ID, workerresult.NotNeeded}, {nginx.ID, nginx.ID, workerresult.Removed}}, outcomes(results)); diff != "" || len(fake.removed) > 0 {
		t.Errorf("dry run (-want +got):\n%s\nremoved %v", diff, fake.removed)
	}
}

type mounts []string

func (m mounts) ImageFsMountpoints(context.Context) ([]string, error) { return m, nil }

// TestImageFsMeter: the reported mount point is measured when it lies
// under the mounted path (submounts come along), the path otherwise.
func TestImageFsMeter(t *testing.T) {
	dir := stateDir(t)
	sub := dir + string(os.PathSeparator) + "snapshots"
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		rt   mounts
		path string
		ok   bool
	}{
		"reported, no path":                       {rt: mounts{sub}, ok: true},
		"reported under the path":                 {rt: mounts{sub}, path: dir, ok: true},
		"reported elsewhere, unseen: the path":    {rt: mounts{"/nowhere/at/all"}, path: dir, ok: true},
		"reported on another filesystem: refused": {rt: mounts{otherFs(t, dir)}, path: dir},
		"none reported, the path":                 {rt: mounts{}, path: dir, ok: true},
		"reported missing, no path":               {rt: mounts{"/nowhere/at/all"}},
		"none reported, no path":                  {rt: mounts{}},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := ImageFsMeter(tc.rt, tc.path)(context.Background())
			if tc.ok != (err == nil) || (err == nil && d.Capacity == 0) {
				t.Fatalf("got %+v, %v; want ok=%v", d, err, tc.ok)
			}
			if elsewhere := errors.Is(err, ErrImageFsElsewhere); elsewhere != (tc.path != "" && !tc.ok) {
				t.Errorf("error %v: ErrImageFsElsewhere %v", err, elsewhere)
			}
		})
	}
}

// TestDiskPressureStopsWhenNothingFreed: a measured disk that never moves
// (not the one the removals free) stops the drain after one batch, instead
// of batches doubling until every candidate is gone.
func TestDiskPressureStopsWhenNothingFreed(t *testing.T) {
	// 900 of 1000 used, whatever is removed.
	s, fake := diskRunOn(t, 10, func(*shrinkingDisk) uint64 { return 900 })
	if removed := len(fake.removed); removed == 0 || removed >= 10 {
		t.Fatalf("removed %d of 10 on a disk that never moves, want the first batches only", removed)
	}
	if s.Counts["not needed"] == 0 {
		t.Errorf("counts %v: the rest should be kept as not needed", s.Counts)
	}
}

// TestImageFsElsewhereFailsTheNode: a runtime whose image filesystem is
// outside imageFsPath fails the node with the reason, and the disk policy
// removes nothing.
func TestImageFsElsewhereFailsTheNode(t *testing.T) {
	dir := stateDir(t)
	elsewhere := otherFs(t, dir)
	fake := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	rt := timedRuntime{fakeRuntime: fake, times: map[string]time.Time{alpine.ID: t0.Add(-time.Hour), nginx.ID: t0.Add(-2 * time.Hour)}}
	info := &RunInfo{}
	_, err := Run(context.Background(), rt, Targets{Scheduled: true, Collected: []string{alpine.ID, nginx.ID}}, Options{
		Retention: retention.Settings{MinAge: time.Minute, HighThresholdPercent: 85, LowThresholdPercent: 80},
		Now:       t0, Info: info, MeasureDisk: ImageFsMeter(mounts{elsewhere}, dir),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(info.DiskErr, ErrImageFsElsewhere) || !strings.Contains(info.DiskErr.Error(), elsewhere) {
		t.Errorf("DiskErr %v, want ErrImageFsElsewhere naming the runtime's mount", info.DiskErr)
	}
	if len(fake.removed) > 0 {
		t.Errorf("removed %v by a disk that was not measured", fake.removed)
	}
}

// otherFs is a directory on another filesystem than dir's: /dev (a devtmpfs
// on Linux) or /proc, whichever differs; on Windows another drive (under
// Wine, C: is the prefix and Z: the host's root). The test fails under CI
// where none does, so that the refusal is never left untested.
func otherFs(t *testing.T, dir string) string {
	t.Helper()
	for _, p := range []string{"/dev", "/proc", "/sys", "/run", `C:\`, `Z:\`} {
		if same, known := diskusage.SameFilesystem(p, dir); known && !same {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no directory on another filesystem than the test's to compare with")
	}
	t.Skip("no directory on another filesystem than the test's here")
	return ""
}
