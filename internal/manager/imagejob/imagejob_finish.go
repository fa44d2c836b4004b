// The end of a run: the outcome, its metrics and Events, and a job failed
// before it could run.

package imagejob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Reasons a whole job fails for, beside those of its nodes (wave).
const (
	// ReasonPodsRefused fails a whole job whose every pod was refused.
	ReasonPodsRefused = "PodsRefused"
	// ReasonReferencesNotSynced fails a job whose wave waited for the
	// reference index longer than podStartTimeout.
	ReasonReferencesNotSynced = "ReferencesNotSynced"
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
	r.queue.leave(job.Name)
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
