// Admission of a wave into the cluster-wide queue (queue.go): which of the
// planned pods may be created now that other runs hold nodes and the bound
// on pods in flight is shared.

package imagejob

import (
	"maps"
	"slices"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// admit plans the job's next wave inside the queue's take, so that two
// jobs' passes never both take one node, and the queue records the plan.
func (r *Reconciler) admit(job *eraserv1.ImageJob, data *jobdata.Data, w wave.World, o wave.Observation, budget *config.MaxConcurrent) (wave.Wave, error) {
	var p wave.Wave
	err := r.queue.take(job, wave.RankOf(job, data.Kind), data.Config.Manager.ImageJob.MaxWorkerPods, func(s slot) taken {
		w.Room, w.Bounded, w.Holder = s.room, s.bounded, s.holder
		p = wave.Next(w, o, budget)
		return taken{create: nodeNames(w.Targets, p.Create), waiting: slices.Collect(maps.Keys(p.Waiting)), starved: p.Starved}
	})
	return p, err
}

// recordWaiting writes the reached nodes that wait into the status, and the
// run the first of them waits for.
func recordWaiting(job *eraserv1.ImageJob, w wave.World, holders map[string]string) {
	var idx []int
	behind := ""
	for i, target := range w.Targets[:w.Started] {
		if !wave.Waits(w, target.Name) {
			continue
		}
		idx = append(idx, i)
		if behind == "" {
			behind = holders[target.Name]
		}
	}
	job.Status.Waiting = len(idx)
	job.Status.WaitingIndexes = jobdata.FormatIndexes(idx)
	job.Status.QueuedBehind = behind
}
