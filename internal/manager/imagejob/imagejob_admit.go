// Admission of a wave into the cluster-wide queue (queue.go): which of the
// planned pods may be created now that other runs hold nodes and the bound
// on pods in flight is shared.

package imagejob

import (
	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// admit plans the job's next wave with the queue locked, so that two jobs'
// passes never both take one node, and records the plan in the queue.
func (r *Reconciler) admit(job *eraserv1.ImageJob, data *jobdata.Data, w world, o observation, budget *config.MaxConcurrent) (wave, error) {
	rank := rankOf(job, data.Kind)
	r.queue.mu.Lock()
	defer r.queue.mu.Unlock()
	inFlight, err := r.queue.inFlight(r.cached)
	if err != nil {
		return wave{}, err
	}
	w.room, w.bounded = room(data.Config.Manager.ImageJob.MaxWorkerPods, inFlight)
	w.holder = r.queue.holder(r.cached, job, rank)
	p := plan(within(w, reach(o.progress, w.limit, budget)), o)
	create := make([]string, 0, len(p.create))
	for _, i := range p.create {
		create = append(create, w.targets[i].Name)
	}
	waiting := make([]string, 0, len(p.waiting))
	for node := range p.waiting {
		waiting = append(waiting, node)
	}
	r.queue.record(job.Name, rank, create, waiting, p.starved)
	return p, nil
}

// recordWaiting writes the reached nodes that wait into the status, and the
// run the first of them waits for.
func recordWaiting(job *eraserv1.ImageJob, w world, holders map[string]string) {
	var idx []int
	behind := ""
	for i, target := range w.targets[:w.started] {
		if !waits(w, target.Name) {
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
