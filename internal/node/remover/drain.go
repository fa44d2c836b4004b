package remover

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// drainDisk removes from the queue, in order and in batches sized by
// retention.NextBatch, measuring the filesystem after each batch, until
// it is below the low threshold; what is left is kept: as not needed, or
// as its prior result says when that is recently used (unusedFor's reason
// comes first). It returns every queued image's result and the last
// measurement.
func drainDisk(ctx context.Context, rt Runtime, snap *Snapshot, r Retention, queue []int, prior map[int]Result, opts Options) ([]Result, *retention.Disk) {
	var out []Result
	disk := measure(ctx, opts)
	target := r.Settings.Target(*r.Disk)
	var ratio *float64
	previous := 0
	stalled := false
	for len(queue) > 0 && disk != nil && disk.Used() >= target {
		sizes := make([]uint64, len(queue))
		for i, idx := range queue {
			sizes[i] = snap.Images[idx].Size
		}
		k := retention.NextBatch(sizes, disk.Used()-target+1, ratio, previous)
		batch := make([]Removal, k)
		var estimate uint64
		for i, idx := range queue[:k] {
			batch[i] = Removal{Image: idx, Target: snap.Images[idx].ID, Policy: retention.DiskPressure,
				Detail: fmt.Sprintf("image filesystem at %.1f%%, at or above the low threshold %d%% while draining", disk.Percent(), r.Settings.LowThresholdPercent)}
			estimate += sizes[i]
		}
		queue, previous = queue[k:], k
		out = append(out, execute(ctx, rt, snap, batch, opts)...)
		after := measure(ctx, opts)
		if after == nil {
			disk = nil
			break
		}
		freed := float64(disk.Used()) - float64(after.Used())
		ratio = new(float64)
		*ratio = max(freed, 0) / float64(max(estimate, 1))
		disk = after
		if freed <= 0 && removedAny(out[len(out)-k:]) {
			// The measured disk did not move: it is not the one the
			// removals free (or the runtime frees nothing yet). Batches
			// would double until every candidate is gone.
			stalled = true
			break
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
