package remover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// diskQueue takes the disk policy's removals out of the plan, and the
// spare candidates' kept results out of the results, and returns them as
// one queue of image indexes, least recently used first, with the kept
// results taken out (by image index).
func diskQueue(snap *Snapshot, remove []Removal, results []Result, spare []retention.Candidate) ([]Removal, []Result, []int, map[int]Result) {
	var queue []int
	inQueue := map[string]bool{}
	prior := map[int]Result{}
	index := map[string]int{}
	keep := remove[:0:0]
	for _, rm := range remove {
		if rm.Policy == retention.DiskPressure {
			queue = append(queue, rm.Image)
			inQueue[snap.Images[rm.Image].ID] = true
			continue
		}
		keep = append(keep, rm)
	}
	for _, c := range spare {
		queue = append(queue, c.Index)
		inQueue[snap.Images[c.Index].ID] = true
		index[snap.Images[c.Index].ID] = c.Index
	}
	results = slices.DeleteFunc(results, func(res Result) bool {
		if res.ImageID == "" || !inQueue[res.ImageID] {
			return false
		}
		if i, ok := index[res.ImageID]; ok {
			prior[i] = res
		}
		return true
	})
	return keep, results, queue, prior
}

// Relief is how a run under disk pressure brought the image filesystem
// under its target (the low threshold).
type Relief struct {
	// Target is the used bytes the filesystem is brought under.
	Target uint64
	// Reached: a measurement after the removals showed it under.
	Reached bool
	// TimeToTarget is from the issue of the first removal for disk
	// pressure to the measurement that showed the target reached (zero
	// when none was needed).
	TimeToTarget time.Duration
	// FreedToTarget is what the image filesystem measured freed from
	// just before the first removal for disk pressure to that measurement.
	FreedToTarget uint64
	// Removed counts the images removed for disk pressure.
	Removed int
}

// drainDisk removes from the queue, in order and in batches sized by
// retention.NextBatch, measuring the filesystem after each batch, until
// it is below the low threshold; what is left is kept: as not needed, or
// as its prior result says when that is recently used (unusedFor's reason
// comes first). Batches are sized with the highest ratio of bytes freed
// per byte of image size seen so far (retention.FreedRatio), so that the
// drain stops within one image of the target. It returns every queued
// image's result and the last measurement, and fills relief.
func drainDisk(ctx context.Context, rt Runtime, snap *Snapshot, r Retention, queue []int, prior map[int]Result, opts Options, relief *Relief) ([]Result, *retention.Disk) {
	var out []Result
	disk := measure(ctx, opts)
	target := r.Settings.Target(*r.Disk)
	relief.Target = target
	var highest float64
	measured, stalled := false, false
	var start, measuredAt time.Time
	var base uint64
	if disk != nil {
		base = disk.Used()
	}
	for len(queue) > 0 && disk != nil && disk.Used() >= target {
		sizes := make([]uint64, len(queue))
		for i, idx := range queue {
			sizes[i] = snap.Images[idx].Size
		}
		k := retention.NextBatch(sizes, disk.Used()-target+1, retention.FreedRatio(highest, measured))
		batch := make([]Removal, k)
		for i, idx := range queue[:k] {
			batch[i] = Removal{Image: idx, Target: snap.Images[idx].ID, Policy: retention.DiskPressure,
				Detail: fmt.Sprintf("image filesystem at %.1f%%, at or above the low threshold %d%% while draining", disk.Percent(), r.Settings.LowThresholdPercent)}
		}
		queue = queue[k:]
		if start.IsZero() {
			start = time.Now()
		}
		done := execute(ctx, rt, snap, batch, opts)
		out = append(out, done...)
		after := measure(ctx, opts)
		measuredAt = time.Now()
		if after == nil {
			disk = nil
			break
		}
		var removed uint64
		for _, res := range done {
			if res.Outcome == workerresult.Removed {
				removed += res.Bytes
				relief.Removed++
			}
		}
		freed := float64(disk.Used()) - float64(after.Used())
		if removed > 0 {
			highest, measured = max(highest, freed/float64(removed)), true
		}
		disk = after
		if freed <= 0 && removedAny(done) {
			// The measured disk did not move: it is not the one the
			// removals free (or the runtime frees nothing yet). The
			// batches would go on until every candidate is gone.
			stalled = true
			break
		}
	}
	if disk != nil && disk.Used() < target {
		relief.Reached = true
		if !start.IsZero() {
			relief.TimeToTarget = measuredAt.Sub(start)
			relief.FreedToTarget = base - min(disk.Used(), base)
		}
	}
	for _, idx := range queue {
		img := snap.Images[idx]
		detail := "the image filesystem could not be measured again: no more removed for disk pressure"
		switch {
		case stalled:
			detail = fmt.Sprintf("the last batch of removals freed nothing measurable on the image filesystem (at %.1f%%): no more removed for disk pressure", disk.Percent())
		case disk != nil:
			detail = fmt.Sprintf("enough space freed: image filesystem at %.1f%%, below the low threshold %d%%", disk.Percent(), r.Settings.LowThresholdPercent)
		}
		res := Result{Target: img.ID, ImageID: img.ID, Names: img.Tags, Outcome: workerresult.NotNeeded, Bytes: img.Size, Detail: detail}
		if p, ok := prior[idx]; ok && p.Outcome == workerresult.RecentlyUsed {
			res = p
		}
		out = append(out, res)
	}
	return out, disk
}

// measure reads the image filesystem; a failure is logged and leaves it
// unmeasured, so the disk policy removes nothing.
func measure(ctx context.Context, opts Options) *retention.Disk {
	if opts.MeasureDisk == nil {
		opts.Log.Error("the disk-pressure policy is on but the image filesystem cannot be measured here: it removes nothing")
		return nil
	}
	d, err := opts.MeasureDisk(ctx)
	if err != nil {
		opts.Log.Error("measuring the image filesystem failed: the disk-pressure policy removes nothing", "error", err)
		if errors.Is(err, ErrImageFsElsewhere) && opts.Info != nil && opts.Info.DiskErr == nil {
			opts.Info.DiskErr = err
		}
		return nil
	}
	return &d
}

// removedAny is whether any of the results removed an image.
func removedAny(results []Result) bool {
	for _, r := range results {
		if r.Outcome == workerresult.Removed {
			return true
		}
	}
	return false
}

// logRelief says once how the run under disk pressure ended: the target,
// whether it was reached, how long it took and what it freed.
func logRelief(log *slog.Logger, p Relief, after *retention.Disk) {
	attrs := []any{"targetBytes", p.Target, "removedImages", p.Removed}
	if after != nil {
		attrs = append(attrs, "usedBytes", after.Used())
	}
	if !p.Reached {
		log.Warn("disk pressure: the image filesystem is still at or above the target", attrs...)
		return
	}
	attrs = append(attrs, "timeToTargetMs", float64(p.TimeToTarget.Microseconds())/1000, "freedToTargetBytes", p.FreedToTarget)
	log.Info("disk pressure: the image filesystem is below the target", attrs...)
}
