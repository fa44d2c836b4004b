package imagelist

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// conflictRetry is how soon a run blocked by a leftover of another run
// tries again. The garbage collector deletes the leftover within seconds of
// its owner's deletion, and its deletion sends no event to this list.
const conflictRetry = 10 * time.Second

// latestGeneration is the newest generation among the list's jobs.
func latestGeneration(jobs []eraserv1.ImageJob) int64 {
	var g int64
	for i := range jobs {
		g = max(g, generationOf(&jobs[i]))
	}
	return g
}

// markStarted records that the run of generation started has begun, once:
// from then on, its job's disappearance before it is recorded means it was
// deleted, not that it is still to be started. Level-based: a job that
// exists (created by an earlier process, or just now) is enough.
func (r *Reconciler) markStarted(ctx context.Context, list *eraserv1.ImageList, started int64) error {
	if started <= list.Status.StartedGeneration {
		return nil
	}
	list.Status.StartedGeneration = started
	return r.client.Status().Update(ctx, list)
}

// runDeleted says, once, that the current generation's run was stopped by
// the deletion of its job.
func (r *Reconciler) runDeleted(ctx context.Context, list *eraserv1.ImageList) error {
	if c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady); c != nil &&
		c.Reason == eraserv1.ReasonRunDeleted && c.ObservedGeneration == list.Generation {
		return nil
	}
	setRunDeleted(list)
	if err := r.client.Status().Update(ctx, list); err != nil {
		return err
	}
	r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonRunDeleted,
		"the ImageJob of generation %d was deleted before it finished, which stopped its run; edit the spec or set %s to run again",
		list.Generation, eraserv1.AnnotationRunNow)
	return nil
}

// conflict reports a run that cannot start because an object of its name
// belongs to another run, and waits it out.
func (r *Reconciler) conflict(ctx context.Context, list *eraserv1.ImageList, cause error) (reconcile.Result, error) {
	before := list.Status.DeepCopy()
	setConflict(list, cause)
	if !equalStatus(before, &list.Status) {
		r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonJobConflict, "%v", cause)
		if err := r.client.Status().Update(ctx, list); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: conflictRetry}, nil
}
