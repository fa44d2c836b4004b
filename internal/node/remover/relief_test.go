package remover

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/retention"
)

// ratioDisk is a filesystem on which each removed image frees num/den of
// its size.
type ratioDisk struct {
	rt             *fakeRuntime
	capacity, used uint64
	num, den       uint64
	sizes          map[string]uint64
	measured       int
}

func (d *ratioDisk) freed(id string) uint64 { return d.sizes[id] * d.num / d.den }

func (d *ratioDisk) measure(context.Context) (retention.Disk, error) {
	d.measured++
	used := d.used
	d.rt.mu.Lock()
	for _, id := range d.rt.removed {
		used -= d.freed(id)
	}
	d.rt.mu.Unlock()
	return retention.Disk{Capacity: d.capacity, Available: d.capacity - used}, nil
}

// TestDiskPressureStopsWithinOneImage: whatever the images' sizes and
// whatever a removal frees per byte of size (from a quarter, layers shared
// with kept images, to four times, compressed layers kept twice), a run
// under pressure ends below the target, and removing its last image fewer
// would not have got there; the report says so.
func TestDiskPressureStopsWithinOneImage(t *testing.T) {
	for _, ratio := range [][2]uint64{{1, 4}, {1, 1}, {2, 1}, {3, 1}, {4, 1}} {
		for _, spread := range []uint64{1, 10, 100} {
			t.Run(fmt.Sprintf("frees %d/%d, sizes 1-%dx", ratio[0], ratio[1], spread), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(ratio[0], spread))
				fake := &fakeRuntime{}
				times := map[string]time.Time{}
				sizes := map[string]uint64{}
				var collected []string
				var total uint64
				for i := range 200 {
					img := cri.Image{ID: fmt.Sprintf("sha256:%064x", i), Size: (1 + rng.Uint64N(spread)) << 20}
					fake.images = append(fake.images, img)
					times[img.ID] = t0.Add(-time.Duration(1000-i) * time.Hour)
					sizes[img.ID] = img.Size
					collected = append(collected, img.ID)
					total += img.Size * ratio[0] / ratio[1]
				}
				// At 95%, and the images hold enough to go down to 50%.
				capacity := total * 2
				used := capacity * 95 / 100
				disk := &ratioDisk{rt: fake, capacity: capacity, used: used, num: ratio[0], den: ratio[1], sizes: sizes}
				info := &RunInfo{}
				results, err := Run(context.Background(), timedRuntime{fakeRuntime: fake, times: times}, Targets{Scheduled: true, Collected: collected}, Options{
					Retention: retention.Settings{MinAge: time.Minute, HighThresholdPercent: 90, LowThresholdPercent: 50},
					Now:       t0, MeasureDisk: disk.measure, Info: info,
				})
				if err != nil {
					t.Fatal(err)
				}
				target := capacity * 50 / 100
				after, _ := disk.measure(context.Background())
				if after.Used() >= target {
					t.Fatalf("used %d after the run, target %d", after.Used(), target)
				}
				// The queue's order is the policy's; the last image removed is
				// the one the run would have done without.
				removed := fake.removed
				last := removed[len(removed)-1]
				if after.Used()+disk.freed(last) < target {
					t.Errorf("used %d after the run, target %d: without the last image removed (%d freed) it was already below, %d removed",
						after.Used(), target, disk.freed(last), len(removed))
				}
				s := Summarize(results, false)
				info.Apply(&s)
				fs := s.ImageFs
				if fs == nil || fs.TargetBytes != target || !fs.TargetReached || fs.FreedToTargetBytes != used-after.Used() || fs.UsedAfterBytes != after.Used() {
					t.Errorf("imageFs %+v: want target %d reached, %d freed to get there", fs, target, used-after.Used())
				}
				if info.Relief.Removed != len(removed) {
					t.Errorf("relief counts %d removed, the runtime %d", info.Relief.Removed, len(removed))
				}
				t.Logf("%d removed in %d measurements", len(removed), disk.measured)
			})
		}
	}
}

// TestDiskPressureReliefNotReached: a queue that runs out above the target
// reports the target as not reached; a dry run reports the target alone.
func TestDiskPressureReliefNotReached(t *testing.T) {
	s, _ := diskRun(t, 10, 900)
	if fs := s.ImageFs; fs == nil || fs.TargetBytes != 800 || fs.TargetReached || fs.TimeToTargetMs != 0 || fs.FreedToTargetBytes != 0 {
		t.Errorf("imageFs %+v: want the target 800, not reached", fs)
	}
	fake := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	rt := timedRuntime{fakeRuntime: fake, times: map[string]time.Time{alpine.ID: t0.Add(-time.Hour), nginx.ID: t0.Add(-2 * time.Hour)}}
	info := &RunInfo{}
	results, err := Run(context.Background(), rt, Targets{Scheduled: true, Collected: []string{alpine.ID, nginx.ID}}, Options{
		Retention: retention.Settings{MinAge: time.Minute, HighThresholdPercent: 85, LowThresholdPercent: 80}, Now: t0, DryRun: true, Info: info,
		MeasureDisk: func(context.Context) (retention.Disk, error) {
			return retention.Disk{Capacity: 1000, Available: 100}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s = Summarize(results, true)
	info.Apply(&s)
	if fs := s.ImageFs; fs == nil || fs.TargetBytes != 800 || fs.TargetReached {
		t.Errorf("dry run's imageFs %+v: want the target 800, not reached", fs)
	}
}
