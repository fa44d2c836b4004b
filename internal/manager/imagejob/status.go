// What a job's status and Events say: its progress and conditions, the
// outcome of a run that ended, its failures, and a job failed before it
// could run.

package imagejob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// finish writes the outcome of an ended run (wave.Ended): its phase by
// wave.Result, when it is cleaned up, and the condition that explains it.
func (r *Reconciler) finish(job *eraserv1.ImageJob, p wave.Progress, cfg *config.Config, halted bool) {
	now := metav1.NewTime(r.clock.Now())
	job.Status.CompletionTime = &now
	phase, ratio := wave.Result(p, cfg.Manager.ImageJob.SuccessRatio, halted)
	job.Status.Phase = phase
	delay := cfg.Manager.ImageJob.Cleanup.DelayOnSuccess
	if phase == eraserv1.PhaseFailed {
		delay = cfg.Manager.ImageJob.Cleanup.DelayOnFailure
	}
	deleteAfter := metav1.NewTime(now.Add(delay))
	job.Status.DeleteAfter = &deleteAfter
	r.keepReport(job, now.Add(max(delay, cfg.Manager.ImageJob.Cleanup.KeepReportFor)))
	setFinished(job, p, ratio, cfg.Manager.ImageJob.SuccessRatio)
}

// keepReport says where the job's report is and until when the finished
// job and its report are kept; the report's collector fills in the rest.
func (r *Reconciler) keepReport(job *eraserv1.ImageJob, until time.Time) {
	if job.Status.Report == nil {
		job.Status.Report = &eraserv1.ReportRef{}
	}
	job.Status.Report.Namespace = r.opts.Namespace
	job.Status.Report.Selector = nodereport.Selector(job.Name)
	job.Status.Report.DeleteAfter = ptr.To(metav1.NewTime(until))
}

// announce emits the outcome Event and records the job's metrics, once: only
// the pass whose status update finished the job gets here.
func (r *Reconciler) announce(job *eraserv1.ImageJob, perNode map[string]metrics.NodeCounts) {
	c := readyCondition(job)
	kind := corev1.EventTypeNormal
	if job.Status.Phase == eraserv1.PhaseFailed {
		kind = corev1.EventTypeWarning
	}
	r.recorder.Event(job, kind, string(job.Status.Phase), c.Message)
	seconds := job.Status.CompletionTime.Sub(job.Status.StartTime.Time).Seconds()
	r.metrics.JobFinished(seconds, job.Status.Succeeded, job.Status.Failed, perNode)
	if job.Status.Phase == eraserv1.PhaseCompleted {
		r.metrics.JobCompleted(trigger(job), job.Status.CompletionTime.Time)
	}
}

// trigger is what started the job, as the metrics name it.
func trigger(job *eraserv1.ImageJob) string {
	if job.Labels[eraserv1.LabelJobOwner] == eraserv1.JobOwnerCollector {
		return "schedule"
	}
	return "imagelist"
}

// fail ends a job that cannot run at all. It leaves the queue at once,
// whether or not its status write goes through: it will create no pod, so
// it must neither hold a node nor wait for one.
func (r *Reconciler) fail(ctx context.Context, job *eraserv1.ImageJob, reason, message string) error {
	r.queue.Leave(job.Name)
	now := metav1.NewTime(r.clock.Now())
	job.Status.Phase = eraserv1.PhaseFailed
	job.Status.CompletionTime = &now
	if job.Status.StartTime == nil {
		job.Status.StartTime = &now
	}
	// Without its data the job cannot know its delay; keep it an hour for
	// inspection.
	deleteAfter := metav1.NewTime(now.Add(time.Hour))
	job.Status.DeleteAfter = &deleteAfter
	r.keepReport(job, deleteAfter.Time)
	setCondition(job, metav1.ConditionFalse, reason, message)
	if err := r.client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("writing the status of the failed job (%s): %w", reason, err)
	}
	r.recorder.Event(job, corev1.EventTypeWarning, reason, message)
	r.metrics.JobFinished(0, job.Status.Succeeded, job.Status.Failed, nil)
	return nil
}

func boundedFailures(m map[string]eraserv1.NodeFailure) []eraserv1.NodeFailure {
	out := make([]eraserv1.NodeFailure, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b eraserv1.NodeFailure) int { return strings.Compare(a.Node, b.Node) })
	if len(out) > eraserv1.MaxReportedNodes {
		out = out[:eraserv1.MaxReportedNodes]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

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
	setCondition(job, metav1.ConditionFalse, eraserv1.ReasonFailureBudgetExceeded, textcut.Cut(fmt.Sprintf(
		"%s; %d nodes not started (counted as skipped); %s", wave.BudgetText(p, budget), wave.NotStarted(p), finished), wave.MaxMessage))
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
