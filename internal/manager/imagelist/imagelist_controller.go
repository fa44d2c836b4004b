// Package imagelist turns ImageLists into ImageJobs: one job per generation
// of the list's spec, one at a time. An edit made while a job runs is
// applied by the next job, never lost, and the job's results are recorded in
// the ImageList's status before the job may be cleaned up. The
// eraser.sh/run-now annotation runs the current spec again; it is refused,
// not queued, while a job of the list runs.
package imagelist

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/util/kname"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// Reconciler runs ImageLists.
type Reconciler struct {
	client       client.Client
	recorder     record.EventRecorder
	clock        clock.Clock
	store        *eraserconfig.Store
	namespace    string
	removerImage string
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler with its dependencies. removerImage is
// the manager's --remover-image, if any.
func NewReconciler(c client.Client, recorder record.EventRecorder, clk clock.Clock, store *eraserconfig.Store, namespace, removerImage string) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, clock: clk, store: store, namespace: namespace, removerImage: removerImage}
}

// SetupWithManager reacts to spec edits and run-now requests (not to the
// status this controller writes), to changes of the jobs it owns, and to
// the pause switch.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagelist").
		For(&eraserv1.ImageList{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, runnow.Predicate()))).
		Owns(&eraserv1.ImageJob{}).
		// Resuming starts what the pause held.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allLists), builder.WithPredicates(pause.Switch(r.namespace))).
		Complete(r)
}

// JobName is deterministic per ImageList and generation, so that a
// restarted or second manager can never start the same run twice. The hash
// folds in the list's UID: a list deleted and created again under the same
// name (kubectl replace --force, GitOps' Replace=true) is another list, whose
// runs never take the names of the first one's jobs, data and pods while the
// garbage collector deletes them. It is a valid label value for any
// ImageList name (pods and ConfigMaps are labelled with it): a long name is
// cut, and the hash of the whole keeps it unique.
func JobName(list *eraserv1.ImageList) string { return jobName(list, "") }

// RunNowJobName is the job of the run-now request the list carries: the
// generation's name and the request's identity, so that a re-run is never
// taken for the generation's first job, nor one request's job for another's.
func RunNowJobName(list *eraserv1.ImageList) string {
	return jobName(list, "-r"+runnow.RequestID(list))
}

func jobName(list *eraserv1.ImageList, run string) string {
	sum := sha256.Sum256([]byte(list.Name + "/" + string(list.UID)))
	suffix := fmt.Sprintf("-%s-g%d%s", hex.EncodeToString(sum[:3]), list.Generation, run)
	base := list.Name[:min(len(list.Name), kname.MaxLabelValue-len(jobPrefix)-len(suffix))]
	return jobPrefix + strings.TrimRight(base, "-._") + suffix
}

const jobPrefix = "imagejob-"

// A job carries a blocking owner reference to its ImageList (see the
// imagejob controller about finalizers). Jobs are patched to mark them
// recorded; their data ConfigMaps are created here and deleted with the job.
// The run-now annotation is removed with a patch.
// +kubebuilder:rbac:groups=eraser.sh,resources=imagelists,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=eraser.sh,resources=imagelists/status,verbs=update
// +kubebuilder:rbac:groups=eraser.sh,resources=imagelists/finalizers,verbs=update
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile honours a run-now request, records finished jobs and starts the
// next one when the spec has changed since the last run. Its steps, by the
// names their errors carry: get (the list), jobs (the list's own), pause
// (the switch), run-now (a request's job), record (finished jobs' results),
// then what the list needs: progress (a running job's), hold (a paused
// run), mark (its generation started), run-deleted, adopt (a list from
// before the install), or start (the generation's job).
//
// A write that lost to a newer version of the list, as when the job just
// created wakes this reconciler before the list's own status update reached
// the cache, is passed again soon (reconcilestep.RequeueOnConflict).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	return reconcilestep.RequeueOnConflict(ctx, res, err)
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	list := &eraserv1.ImageList{}
	if err := r.client.Get(ctx, req.NamespacedName, list); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("get", client.IgnoreNotFound(err))
	}
	if !list.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	owned, err := r.ownedJobs(ctx, list)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("jobs", err)
	}
	held, err := pause.Read(ctx, r.client, r.namespace)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("pause", err)
	}
	if runnow.Requested(list) && !held.Paused {
		// Before anything else writes the list: the request's job is named
		// after the list's resourceVersion as read now.
		if owned, err = r.runNow(ctx, list, owned); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("run-now", err)
		}
	}
	var running *eraserv1.ImageJob
	haveCurrent := false
	for i := range owned {
		job := &owned[i]
		if generationOf(job) == list.Generation {
			haveCurrent = true
		}
		if runnow.Running(job) {
			running = job
		} else if job.Annotations[eraserv1.AnnotationRecorded] == "" {
			if err := r.record(ctx, list, job); err != nil {
				return reconcile.Result{}, reconcilestep.Wrap("record", err)
			}
		}
	}
	switch {
	case running != nil:
		return reconcile.Result{}, reconcilestep.Wrap("progress", r.setProgress(ctx, list, running, latestGeneration(owned)))
	case held.Paused && runnow.Requested(list):
		// Kept, not consumed: it runs on resume.
		return reconcile.Result{}, reconcilestep.Wrap("hold", r.hold(ctx, list, held, "the "+eraserv1.AnnotationRunNow+" request"))
	case haveCurrent || list.Status.ObservedGeneration == list.Generation:
		// This generation has run (or its job awaits cleanup): nothing to do.
		return reconcile.Result{}, reconcilestep.Wrap("mark", r.markStarted(ctx, list, latestGeneration(owned)))
	case list.Status.StartedGeneration >= list.Generation:
		// Its run started and its job is gone unrecorded: deleted while it
		// ran, which stops the run. Only an edit or run-now runs it again.
		return reconcile.Result{}, reconcilestep.Wrap("run-deleted", r.runDeleted(ctx, list))
	}
	if adopted, err := r.adopt(ctx, list); err != nil || adopted {
		return reconcile.Result{}, reconcilestep.Wrap("adopt", err)
	}
	if held.Paused {
		return reconcile.Result{}, reconcilestep.Wrap("hold", r.hold(ctx, list, held, fmt.Sprintf("the run of generation %d", list.Generation)))
	}
	job, err := r.startJob(ctx, list, JobName(list), false)
	if errors.Is(err, jobdata.ErrConflict) {
		res, err := r.conflict(ctx, list, err)
		return res, reconcilestep.Wrap("start", err)
	}
	if err != nil || job == nil {
		return reconcile.Result{}, reconcilestep.Wrap("start", err)
	}
	return reconcile.Result{}, reconcilestep.Wrap("mark", r.markStarted(ctx, list, list.Generation))
}

// ownedJobs are the jobs the list controls, among those labelled with it.
func (r *Reconciler) ownedJobs(ctx context.Context, list *eraserv1.ImageList) ([]eraserv1.ImageJob, error) {
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: kname.LabelValue(list.Name)}); err != nil {
		return nil, err
	}
	var owned []eraserv1.ImageJob
	for _, job := range jobs.Items {
		if metav1.IsControlledBy(&job, list) {
			owned = append(owned, job)
		}
	}
	return owned, nil
}

// runNow starts a job for the list's current spec unless one of its jobs is
// running, then consumes the request. It returns the list's jobs, with the
// one it started.
func (r *Reconciler) runNow(ctx context.Context, list *eraserv1.ImageList, jobs []eraserv1.ImageJob) ([]eraserv1.ImageJob, error) {
	orig := list.DeepCopy()
	v := runnow.Decide(RunNowJobName(list), jobs)
	if v.Action == runnow.Start {
		job, err := r.startJob(ctx, list, v.Job, true)
		if errors.Is(err, jobdata.ErrConflict) {
			// The request stands (not consumed) until its job can be
			// created; the error's backoff retries it.
			_, _ = r.conflict(ctx, list, err)
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if job != nil {
			jobs = append(jobs, *job)
		}
		// A list too large to run has its refusal in the status now.
		orig = list.DeepCopy()
	}
	delete(list.Annotations, eraserv1.AnnotationRunNow)
	// Optimistic: an edit made since the list was read is not overwritten,
	// and a stale read of a request already consumed fails here instead of
	// reporting twice; the retry reads the list again.
	if err := r.client.Patch(ctx, list, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("removing %s from ImageList %s: %w", eraserv1.AnnotationRunNow, list.Name, err)
	}
	if v.Action == runnow.Refuse {
		r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonRunNowRefused,
			"%s refused: ImageJob %s of this ImageList is running; set it again once it has finished", eraserv1.AnnotationRunNow, v.Job)
	}
	return jobs, nil
}

func generationOf(job *eraserv1.ImageJob) int64 {
	g, _ := strconv.ParseInt(job.Annotations[eraserv1.AnnotationGeneration], 10, 64)
	return g
}

// startJob creates a job named name for the list's current generation, and
// its data. It returns the job, or nil when the list cannot run.
func (r *Reconciler) startJob(ctx context.Context, list *eraserv1.ImageList, name string, runNow bool) (*eraserv1.ImageJob, error) {
	_, raw, _ := r.store.Get()
	job := &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			eraserv1.LabelJobOwner:  eraserv1.JobOwnerImageList,
			eraserv1.LabelImageList: kname.LabelValue(list.Name),
		},
		Annotations: map[string]string{eraserv1.AnnotationGeneration: strconv.FormatInt(list.Generation, 10)},
	}}
	if list.Spec.DryRun {
		job.Annotations[eraserv1.AnnotationDryRun] = "true"
	}
	if err := ctrl.SetControllerReference(list, job, r.client.Scheme()); err != nil {
		return nil, err
	}
	images, dropped, longest := boundEntries(list.Spec.Images)
	created, err := jobdata.CreateJob(ctx, r.client, r.namespace, job, jobdata.Data{
		Kind: podspec.KindManual, DryRun: list.Spec.DryRun, Images: images, Raw: raw, RemoverImage: r.removerImage,
	})
	if errors.Is(err, jobdata.ErrTooLarge) {
		// Only an edit can fix it: record the refusal for this generation
		// and do not retry.
		r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonTooLarge, "no job created: %v", err)
		setTooLarge(list, err)
		return nil, r.client.Status().Update(ctx, list)
	}
	if err != nil {
		if !errors.Is(err, jobdata.ErrConflict) { // the caller reports it
			r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonJobNotCreated, "%v", err)
		}
		return nil, err
	}
	if !created {
		return job, nil
	}
	if dropped > 0 {
		// Once per generation, as the job is: an edit is what fixes it.
		metrics.InputsDropped(metrics.SourceImageListEntry, metrics.ReasonTooLong, dropped)
		log.FromContext(ctx).Info("ImageList entries left out of the run: longer than any image reference", "imageList", list.Name, "dropped", dropped, "longestBytes", longest, "maxBytes", imageref.MaxLength)
		r.recorder.Eventf(list, corev1.EventTypeWarning, eraserv1.ReasonEntriesDropped,
			"%d entries left out of ImageJob %s: longer than any image reference can be (%d bytes; the longest %d)", dropped, job.Name, imageref.MaxLength, longest)
	}
	reason, how := eraserv1.ReasonJobCreated, ""
	if runNow {
		reason, how = eraserv1.ReasonRunNow, ", on "+eraserv1.AnnotationRunNow
	}
	r.recorder.Eventf(list, corev1.EventTypeNormal, reason, "ImageJob %s created for generation %d (%d entries%s)%s",
		job.Name, list.Generation, len(list.Spec.Images), dryRunText(list.Spec.DryRun), how)
	return job, nil
}

func dryRunText(dry bool) string {
	if dry {
		return ", dry run"
	}
	return ""
}

// setProgress reflects a running job in the list's Ready condition.
func (r *Reconciler) setProgress(ctx context.Context, list *eraserv1.ImageList, job *eraserv1.ImageJob, started int64) error {
	before := list.Status.DeepCopy()
	setRunning(list, job)
	list.Status.StartedGeneration = max(list.Status.StartedGeneration, started)
	if equalStatus(before, &list.Status) {
		return nil
	}
	return r.client.Status().Update(ctx, list)
}

// record copies a finished job's results into the list's status, then marks
// the job so that it may be cleaned up.
func (r *Reconciler) record(ctx context.Context, list *eraserv1.ImageList, job *eraserv1.ImageJob) error {
	if newerResults(&list.Status, job) {
		gen := generationOf(job)
		ts := job.Status.CompletionTime
		if ts == nil {
			now := metav1.NewTime(r.clock.Now())
			ts = &now
		}
		list.Status.Timestamp = ts
		list.Status.Success = int64(job.Status.Succeeded)
		list.Status.Failed = int64(job.Status.Failed)
		list.Status.Skipped = int64(job.Status.Skipped)
		list.Status.Results = job.Status.Results.DeepCopy()
		// kubectl eraser report imagelist/<name> follows it to the report.
		list.Status.Job = job.Name
		list.Status.ObservedGeneration = gen
		setFinished(list, job)
		if err := r.client.Status().Update(ctx, list); err != nil {
			return err
		}
		kind := corev1.EventTypeNormal
		if job.Status.Phase == eraserv1.PhaseFailed {
			kind = corev1.EventTypeWarning
		}
		r.recorder.Eventf(list, kind, "Job"+string(job.Status.Phase), "ImageJob %s: %s", job.Name, jobMessage(job))
	}
	patch := client.MergeFrom(job.DeepCopy())
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[eraserv1.AnnotationRecorded] = "true"
	return client.IgnoreNotFound(r.client.Patch(ctx, job, patch))
}
