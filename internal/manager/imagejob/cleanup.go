// The cleanup phase: a finished job's pods, report and the job itself go
// after their delays.

package imagejob

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
)

// cleanup deletes a finished job, its pods and ConfigMaps once its delay has
// passed and, for an ImageList's job, once the ImageList recorded the results.
func (r *Reconciler) cleanup(ctx context.Context, job *eraserv1.ImageJob) (reconcile.Result, error) {
	if job.Status.DeleteAfter == nil {
		return reconcile.Result{}, nil
	}
	if wait := job.Status.DeleteAfter.Sub(r.clock.Now()); wait > 0 {
		// Nothing else will bring the job back when its time comes.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if waitsForRecording(job) {
		// The owner (the ImageList, or the schedule, which measures the next
		// run from this one's end) annotates the job once it has recorded
		// it; the annotation update brings the job back here.
		return reconcile.Result{}, nil
	}
	rep := job.Status.Report
	if (rep == nil || !rep.Complete) && job.Status.CompletionTime != nil {
		// The pods' logs are the report's only source: keep them until
		// the collector has read them. The wait counts from when this
		// process first saw the job finished, if later than its end, so
		// that a manager down across the job's end still gives the
		// collector its time. Its status patch brings the job back; the
		// requeue bounds the wait should it never come.
		since := job.Status.CompletionTime.Time
		if seen := r.finishedSeen(job); seen.After(since) {
			since = seen
		}
		if wait := since.Add(reportWait).Sub(r.clock.Now()); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.deletePods(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	// The node list stays with the job: the report names every node of
	// it, and a report not complete yet still reads it.
	if err := r.deleteConfigMap(ctx, job.Name); err != nil {
		return reconcile.Result{}, err
	}
	if rep != nil && rep.DeleteAfter != nil {
		if wait := rep.DeleteAfter.Sub(r.clock.Now()); wait > 0 {
			// The job and its report outlive the pods (keepReportFor);
			// nothing else brings the job back when that time comes.
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	return reconcile.Result{}, r.deleteJob(ctx, job)
}

// deleteJob deletes a finished job whose pods and data are gone, with its
// report and node list.
func (r *Reconciler) deleteJob(ctx context.Context, job *eraserv1.ImageJob) error {
	if err := r.deleteReport(ctx, job); err != nil {
		return err
	}
	if err := jobdata.DeleteNodes(ctx, r.client, r.opts.Namespace, job); err != nil {
		return fmt.Errorf("deleting job %s's node list: %w", job.Name, err)
	}
	err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(job.UID)})
	r.forget(job.Name)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting job %s: %w", job.Name, err)
	}
	return nil
}

// deleteConfigMap deletes one of the job's ConfigMaps. The owner reference
// would have the garbage collector do it too, but not on clusters (and test
// servers) without one.
func (r *Reconciler) deleteConfigMap(ctx context.Context, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: name}}
	if err := r.client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ConfigMap %s: %w", name, err)
	}
	return nil
}

// finishedSeen is when this process first saw the finished job.
func (r *Reconciler) finishedSeen(job *eraserv1.ImageJob) time.Time {
	return r.firstSeen(job, func(st *jobState) *time.Time { return &st.finishedSeen })
}

// cleanupBatch is the most pods one deletecollection request deletes: the
// API server deletes a collection within one request's timeout (60 s), and
// 10,000 pods at once under load outlast it.
const cleanupBatch = 500

// deletePods deletes the job's pods a batch (podspec.LabelBatch) at a time,
// then whatever is left without the label (pods of an older manager).
func (r *Reconciler) deletePods(ctx context.Context, job *eraserv1.ImageJob) error {
	batches := (max(job.Status.Desired, job.Status.Started) + cleanupBatch - 1) / cleanupBatch
	for b := range batches {
		if err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(r.opts.Namespace),
			client.MatchingLabels{podspec.LabelJob: job.Name, podspec.LabelBatch: strconv.Itoa(b)}); err != nil {
			return fmt.Errorf("deleting batch %d of job %s's pods: %w", b, job.Name, err)
		}
	}
	if err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(r.opts.Namespace), client.MatchingLabels{podspec.LabelJob: job.Name}); err != nil {
		return fmt.Errorf("deleting job %s's pods: %w", job.Name, err)
	}
	return nil
}

// reportWait bounds how long a finished job's pods wait for the report's
// collector to read their logs: thousands of nodes take a minute or two.
const reportWait = 10 * time.Minute

// deleteReport deletes the job's report shards. Their owner reference
// would have the garbage collector do it too, but not on clusters (and
// test servers) without one, nor before the job is gone.
func (r *Reconciler) deleteReport(ctx context.Context, job *eraserv1.ImageJob) error {
	// Shards are not in the cache (cacheopts).
	shards, err := reportshards.Shards(ctx, r.apiReader, r.opts.Namespace, job)
	if err != nil {
		return err
	}
	for i := range shards {
		if err := r.client.Delete(ctx, &shards[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting report shard %s: %w", shards[i].Name, err)
		}
	}
	return nil
}

// waitsForRecording says whether a finished job's cleanup waits for its
// owner to record it. An ImageList's job whose list is gone (deleted with
// --cascade=orphan, which removes the owner reference) has no one left to
// record it, and ends on its own deadlines.
func waitsForRecording(job *eraserv1.ImageJob) bool {
	if job.Annotations[eraserv1.AnnotationRecorded] != "" {
		return false
	}
	switch job.Labels[eraserv1.LabelJobOwner] {
	case eraserv1.JobOwnerImageList:
		return metav1.GetControllerOfNoCopy(job) != nil
	case eraserv1.JobOwnerCollector:
		return true
	}
	return false
}
