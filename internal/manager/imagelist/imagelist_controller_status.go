package imagelist

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

func jobMessage(job *eraserv1.ImageJob) string {
	if c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady); c != nil {
		return c.Message
	}
	return string(job.Status.Phase)
}

// setRunning: Running while the current generation's job runs, Queued
// while some of its nodes wait for another run's worker, Pending while an
// older generation's job must finish first.
func setRunning(list *eraserv1.ImageList, job *eraserv1.ImageJob) {
	reason, msg := eraserv1.ReasonRunning, fmt.Sprintf("ImageJob %s is running: %s", job.Name, jobMessage(job))
	list.Status.QueuedBehind = ""
	switch {
	case generationOf(job) != list.Generation:
		reason = eraserv1.ReasonPending
		msg = fmt.Sprintf("the edit (generation %d) runs after ImageJob %s (generation %d) finishes", list.Generation, job.Name, generationOf(job))
	case job.Status.Waiting > 0:
		reason = eraserv1.ReasonQueued
		list.Status.QueuedBehind = job.Status.QueuedBehind
		msg = fmt.Sprintf("ImageJob %s: %d of %d nodes wait for another run's worker to finish on them (one worker per node)",
			job.Name, job.Status.Waiting, job.Status.Desired-job.Status.Skipped)
		if b := job.Status.QueuedBehind; b != "" {
			msg += ", the first behind " + b
		}
		msg += ": " + jobMessage(job)
	}
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: reason, Message: msg,
		ObservedGeneration: list.Generation,
	})
}

func setFinished(list *eraserv1.ImageList, job *eraserv1.ImageJob) {
	list.Status.QueuedBehind = ""
	c := metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionTrue, Reason: eraserv1.ReasonSucceeded,
		Message: jobMessage(job), ObservedGeneration: generationOf(job)}
	if job.Status.Phase == eraserv1.PhaseFailed {
		c.Status, c.Reason = metav1.ConditionFalse, eraserv1.ReasonFailed
		// A run stopped by its failure budget says so on the list too.
		if jc := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady); jc != nil && jc.Reason == eraserv1.ReasonFailureBudgetExceeded {
			c.Reason = jc.Reason
		}
	}
	meta.SetStatusCondition(&list.Status.Conditions, c)
}

// setTooLarge records that this generation cannot run: the generation is
// observed (nothing more will happen for it), with the reason.
func setTooLarge(list *eraserv1.ImageList, err error) {
	list.Status.ObservedGeneration = list.Generation
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: eraserv1.ReasonTooLarge,
		Message: err.Error() + "; split the list into several ImageLists", ObservedGeneration: list.Generation,
	})
}

func equalStatus(a, b *eraserv1.ImageListStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// newerResults says whether a finished job's results supersede those in the
// status: a later generation's, or the same generation's finished no
// earlier, as a run-now run of an unchanged spec is. Jobs of a list run one
// at a time, but a job's recording may be retried after a later one's.
func newerResults(st *eraserv1.ImageListStatus, job *eraserv1.ImageJob) bool {
	if gen := generationOf(job); gen != st.ObservedGeneration {
		return gen > st.ObservedGeneration
	}
	ct := job.Status.CompletionTime
	return st.Timestamp == nil || ct == nil || !ct.Before(st.Timestamp)
}

// setRunDeleted: the current generation's job was deleted while it ran.
func setRunDeleted(list *eraserv1.ImageList) {
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: eraserv1.ReasonRunDeleted,
		Message: fmt.Sprintf("the ImageJob of generation %d was deleted before it finished; edit the spec or set %s to run again",
			list.Generation, eraserv1.AnnotationRunNow),
		ObservedGeneration: list.Generation,
	})
}

// setConflict: the run waits for a leftover of another run to go.
func setConflict(list *eraserv1.ImageList, cause error) {
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: eraserv1.ReasonJobConflict,
		Message: cause.Error(), ObservedGeneration: list.Generation,
	})
}
