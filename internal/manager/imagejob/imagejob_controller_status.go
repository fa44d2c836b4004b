package imagejob

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

func setCondition(job *eraserv1.ImageJob, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: status, Reason: reason, Message: message,
		ObservedGeneration: job.Generation,
	})
}

func readyCondition(job *eraserv1.ImageJob) metav1.Condition {
	if c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// setRunning says how far the job is.
func setRunning(job *eraserv1.ImageJob, eligible int, skipped []nodefilter.Skipped) {
	msg := fmt.Sprintf("%d of %d nodes done (%d succeeded, %d failed), %d started%s",
		job.Status.Succeeded+job.Status.Failed, eligible, job.Status.Succeeded, job.Status.Failed, job.Status.Started-job.Status.Waiting, skippedText(skipped))
	if n := job.Status.Waiting; n > 0 {
		msg += fmt.Sprintf("; %d queued (one worker per node)", n)
		if job.Status.QueuedBehind != "" {
			msg += ", first behind run " + job.Status.QueuedBehind
		}
	}
	setCondition(job, metav1.ConditionUnknown, eraserv1.ReasonRunning, msg)
}

// setFinished explains the outcome, naming failed nodes.
func setFinished(job *eraserv1.ImageJob, p wave.Progress, ratio, want float64) {
	msg := fmt.Sprintf("%d of %d nodes succeeded (ratio %.3f, required %.3f), %d failed", p.Succeeded, p.Eligible, ratio, want, p.Failed)
	if p.Eligible == 0 {
		msg = "no eligible nodes"
	}
	if n := len(job.Status.FailedNodes); n > 0 {
		var parts []string
		for _, f := range job.Status.FailedNodes[:min(n, 5)] {
			parts = append(parts, f.Node+" ("+f.Reason+")")
		}
		msg += ": " + strings.Join(parts, ", ")
		if p.Failed > 5 {
			msg += fmt.Sprintf(" and %d more", p.Failed-5)
		}
	}
	if job.Status.Phase == eraserv1.PhaseCompleted {
		setCondition(job, metav1.ConditionTrue, eraserv1.ReasonSucceeded, msg)
	} else {
		setCondition(job, metav1.ConditionFalse, eraserv1.ReasonFailed, msg)
	}
}

// skippedText counts the skipped nodes by reason and names what decided
// it (taints, selector labels), a few of each, so that a node left out by
// the configuration is explained where the job's progress is.
func skippedText(skipped []nodefilter.Skipped) string {
	if len(skipped) == 0 {
		return ""
	}
	count := map[string]int{}
	details := map[string]map[string]bool{}
	for _, s := range skipped {
		count[s.Reason]++
		if s.Detail != "" {
			if details[s.Reason] == nil {
				details[s.Reason] = map[string]bool{}
			}
			details[s.Reason][s.Detail] = true
		}
	}
	var parts []string
	for r, n := range count {
		part := fmt.Sprintf("%d %s", n, r)
		if d := slices.Sorted(maps.Keys(details[r])); len(d) > 0 {
			shown := d[:min(len(d), maxDetails)]
			part += " (" + strings.Join(shown, ", ")
			if more := len(d) - len(shown); more > 0 {
				part += fmt.Sprintf(" and %d more", more)
			}
			part += ")"
		}
		parts = append(parts, part)
	}
	sort.Strings(parts)
	return "; skipped: " + strings.Join(parts, ", ")
}

// maxDetails bounds the taints or labels named per skip reason.
const maxDetails = 3

// setDraining says why no more pods start while the running ones finish.
func setDraining(job *eraserv1.ImageJob, p wave.Progress, budget *config.MaxConcurrent) {
	setCondition(job, metav1.ConditionUnknown, eraserv1.ReasonRunning, fmt.Sprintf(
		"%s; no more worker pods are created, %d running are let finish, %d nodes will not be started",
		wave.BudgetText(p, budget), p.Active, wave.NotStarted(p)))
}

// setOverrun explains a run ended by its budget: the counts, the nodes not
// started (counted as skipped) and the first failures (setFinished's).
func setOverrun(job *eraserv1.ImageJob, p wave.Progress, budget *config.MaxConcurrent) {
	finished := readyCondition(job).Message
	setCondition(job, metav1.ConditionFalse, eraserv1.ReasonFailureBudgetExceeded, wave.Truncate(fmt.Sprintf(
		"%s; %d nodes not started (counted as skipped); %s", wave.BudgetText(p, budget), wave.NotStarted(p), finished)))
}

// announceOverrun emits a Warning the first time this process sees the
// budget exceeded: the moment the run stops growing, which may be long
// before its running pods let it end. A restart may repeat it.
func (r *Reconciler) announceOverrun(job *eraserv1.ImageJob, st *jobState, p wave.Progress, budget *config.MaxConcurrent) {
	if st.overrun {
		return
	}
	st.overrun = true
	r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonFailureBudgetExceeded,
		"%s; no more worker pods are created, %d running are let finish, %d nodes will not be started",
		wave.BudgetText(p, budget), p.Active, wave.NotStarted(p))
}
