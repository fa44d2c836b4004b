// Package schedule runs scheduled (collector) jobs when
// components.collector.enabled: every repeatInterval after the previous run
// ended, or at the times of a cron expression, never two at once. Its state
// (last start and end) lives in a ConfigMap, so a restarted manager adopts a
// running job and keeps the rhythm instead of starting a run per restart.
//
// The eraser.sh/run-now annotation on that ConfigMap starts a run at once.
// The ConfigMap is the manager's own (no chart or GitOps tool renders it),
// so annotating it is not drift for anyone, and it exists from the
// manager's first reconcile on.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/wire/config"
	pauseswitch "github.com/eraser-oss/eraser/internal/wire/pause"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// StateName is the ConfigMap holding the schedule's state.
const StateName = schedtimes.StateName

// key is the one request this controller handles.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "schedule"}}

// Reconciler starts scheduled jobs.
type Reconciler struct {
	client       client.Client
	recorder     record.EventRecorder
	clock        clock.Clock
	store        *eraserconfig.Store
	namespace    string
	removerImage string
	started      time.Time
	metrics      *metrics.Recorder
	// pendingSince is when a node was first seen due for a catch-up that
	// has not started yet (schedule_catchup.go); this process's memory.
	pendingSince time.Time
	// stateLimit bounds the state ConfigMap's values (stateLimit).
	stateLimit int
	// heldSince is the pause this process last announced holding the
	// schedule (its since), so that it is announced once.
	heldSince time.Time
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler; started is when the manager started.
func NewReconciler(c client.Client, recorder record.EventRecorder, clk clock.Clock, store *eraserconfig.Store, m *metrics.Recorder, namespace, removerImage string) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, clock: clk, store: store, metrics: m, namespace: namespace, removerImage: removerImage, started: clk.Now(), stateLimit: stateLimit}
}

// SetupWithManager wakes the schedule when a scheduled job changes, when the
// configuration changes (enabling the collector takes effect at once), when
// the state ConfigMap carries a run-now request, and once at start. The
// manager's cache holds the ConfigMaps of its namespace, the state's among
// them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	wake := make(chan event.GenericEvent, 1)
	wake <- event.GenericEvent{Object: &eraserv1.ImageJob{}}
	go func() {
		for range r.store.Subscribe() {
			select {
			case wake <- event.GenericEvent{Object: &eraserv1.ImageJob{}}:
			default:
			}
		}
	}()
	toKey := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("schedule").
		WatchesRawSource(source.Channel(wake, toKey)).
		Watches(&eraserv1.ImageJob{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetLabels()[eraserv1.LabelJobOwner] == eraserv1.JobOwnerCollector {
				return []reconcile.Request{key}
			}
			return nil
		})).
		Watches(&corev1.ConfigMap{}, toKey, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.namespace && o.GetName() == StateName && runnow.Requested(o)
		}))).
		// Resuming starts what the pause held.
		Watches(&corev1.ConfigMap{}, toKey, builder.WithPredicates(pause.Switch(r.namespace))).
		// A node that joins or becomes Ready may be due for a catch-up.
		Watches(&corev1.Node{}, toKey, builder.WithPredicates(predicate.Funcs{
			UpdateFunc:  func(e event.UpdateEvent) bool { return nodeReadyChanged(e.ObjectOld, e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
		})).
		Complete(r)
}

// The schedule's state lives in one ConfigMap, created once and then
// updated (which also consumes its run-now requests); jobs are created and
// patched to mark them recorded.
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile honours a run-now request, records finished runs, and starts
// the next one when it is due. Its steps, by the names their errors carry:
// jobs (the scheduled ones), state (the schedule's ConfigMap), pause (the
// switch), run-now (a request's job), record (finished runs' ends and
// coverage into the state, then the runs marked recorded), and, while no
// run is going and the collector is on and not paused: nodes (those a run
// would cover), then catch-up (a batch for nodes a run left out) or start
// (the run of the slot that is due).
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	cfg, raw, _ := r.store.Get()
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("jobs", err)
	}
	st, cm, err := r.state(ctx)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("state", err)
	}
	if since := scheduledSince(st, cfg.Components.Collector.Enabled, r.clock.Now()); !since.Equal(st.ScheduledSince) {
		st.ScheduledSince = since
		if err := r.saveState(ctx, cm, st); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("state", err)
		}
	}
	r.publishLastSuccess(st)
	held, err := pause.Read(ctx, r.client, r.namespace)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("pause", err)
	}
	if runnow.Requested(cm) && !held.Paused {
		started, err := r.runNow(ctx, cfg, raw, cm, &st, jobs.Items)
		if err != nil || started {
			// The new job is not in this pass's list; its creation wakes us
			// to carry on with it.
			return reconcile.Result{}, reconcilestep.Wrap("run-now", err)
		}
	}
	if slices.ContainsFunc(jobs.Items, func(j eraserv1.ImageJob) bool { return runnow.Running(&j) }) {
		// Skip while a run is going; its end wakes us.
		return reconcile.Result{}, nil
	}
	if err := r.recordEnds(ctx, cm, &st, jobs.Items); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("record", err)
	}
	if !cfg.Components.Collector.Enabled {
		// A configuration change wakes us if it enables the collector.
		return reconcile.Result{}, nil
	}
	if held.Paused {
		// No scheduled run, catch-up or run-now request starts; resuming
		// wakes us, and a run that came due meanwhile starts then.
		r.holdOnce(ctx, cm, held)
		return reconcile.Result{}, nil
	}
	r.heldSince = time.Time{}
	return r.startDue(ctx, cfg, raw, cm, &st)
}

// recordEnds moves the state on by the finished runs not recorded yet (their
// ends, and the nodes they covered), saves it, and only then marks the runs
// recorded, which lets them be cleaned up.
func (r *Reconciler) recordEnds(ctx context.Context, cm *corev1.ConfigMap, st *State, jobs []eraserv1.ImageJob) error {
	changed := false
	var finished []*eraserv1.ImageJob
	for i := range jobs {
		j := &jobs[i]
		// A catch-up's end does not move the rhythm: the next scheduled
		// run is still one interval after the last scheduled one.
		if ct := j.Status.CompletionTime; ct != nil && ct.After(st.LastEnd) && !catchUpOf(j) {
			st.LastEnd = ct.Time
			changed = true
		}
		if ct := j.Status.CompletionTime; ct != nil && ct.After(st.LastSuccess) && j.Status.Phase == eraserv1.PhaseCompleted {
			st.LastSuccess = ct.Time
			changed = true
		}
		if j.Annotations[eraserv1.AnnotationRecorded] == "" {
			finished = append(finished, j)
		}
	}
	if len(finished) > 0 {
		if err := r.recordCoverage(ctx, st, finished); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		if err := r.saveState(ctx, cm, *st); err != nil {
			return err
		}
		r.publishLastSuccess(*st)
	}
	for _, j := range finished {
		patch := client.MergeFrom(j.DeepCopy())
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations[eraserv1.AnnotationRecorded] = "true"
		if err := r.client.Patch(ctx, j, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// startDue starts the run of the slot that is due, or else a catch-up's
// batch when one is due, and wakes the reconciler for whichever comes first.
func (r *Reconciler) startDue(ctx context.Context, cfg *config.Config, raw []byte, cm *corev1.ConfigMap, st *State) (reconcile.Result, error) {
	now := r.clock.Now()
	next := NextRun(cfg.Manager.Scheduling, *st, r.started)
	eligible, exists, err := r.eligible(ctx, cfg)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("nodes", err)
	}
	st.Coverage = st.Coverage.prune(exists)
	r.observeCoverage(st.Coverage, eligible, interval(cfg.Manager.Scheduling, st.LastStart))
	if next.After(now) {
		// The slot's time or a catch-up's batch, whichever comes first:
		// nothing else wakes us for them.
		res, err := r.catchUp(ctx, cfg, raw, cm, st, eligible, next)
		return res, reconcilestep.Wrap("catch-up", err)
	}
	// Named after the slot, so two replicas or a restart cannot start it twice.
	if err := r.createJob(ctx, fmt.Sprintf("imagejob-scheduled-%d", next.Unix()), cfg, raw, "scheduled run started", nil); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("start", err)
	}
	st.LastStart = now
	return reconcile.Result{}, reconcilestep.Wrap("start", r.saveState(ctx, cm, *st))
}

// RunNowJobName is the job of the run-now request cm carries.
func RunNowJobName(cm *corev1.ConfigMap) string {
	return "imagejob-scheduled-now-" + runnow.RequestID(cm)
}

// runNow starts a scheduled run at once, unless the collector is disabled or
// a scheduled run is going, and consumes the request. It reports whether it
// started the run. A run-now run is a scheduled run like any other: its
// start and end are the state's, and the rhythm goes on from them.
func (r *Reconciler) runNow(ctx context.Context, cfg *config.Config, raw []byte, cm *corev1.ConfigMap, st *State, jobs []eraserv1.ImageJob) (bool, error) {
	v, refusal := decideRunNow(cfg.Components.Collector.Enabled, RunNowJobName(cm), jobs)
	if v.Action == runnow.Start {
		if err := r.createJob(ctx, v.Job, cfg, raw, "run started now on "+eraserv1.AnnotationRunNow, nil); err != nil {
			return false, err
		}
		st.LastStart = r.clock.Now()
	}
	delete(cm.Annotations, eraserv1.AnnotationRunNow)
	// One update records the start and consumes the request. It fails on a
	// ConfigMap changed since it was read (a stale read of a request already
	// consumed, say), and the retry reads it again, finding the job.
	if err := r.saveState(ctx, cm, *st); err != nil {
		return false, fmt.Errorf("removing %s from ConfigMap %s: %w", eraserv1.AnnotationRunNow, StateName, err)
	}
	switch v.Action {
	case runnow.Start:
		r.recorder.Eventf(cm, corev1.EventTypeNormal, eraserv1.ReasonRunNow, "scheduled ImageJob %s started on %s", v.Job, eraserv1.AnnotationRunNow)
	case runnow.Refuse:
		r.recorder.Eventf(cm, corev1.EventTypeWarning, eraserv1.ReasonRunNowRefused, "%s refused: %s", eraserv1.AnnotationRunNow, refusal)
	}
	return v.Action == runnow.Start, nil
}

// createJob creates a scheduled job named name with the configuration in
// force, and its data; nodes, when not nil, confine it (a catch-up).
func (r *Reconciler) createJob(ctx context.Context, name string, cfg *config.Config, raw []byte, what string, nodes []string) error {
	dryRun := cfg.Manager.Scheduling.DryRun
	job := &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector},
	}}
	job.Annotations = map[string]string{}
	if dryRun {
		// Marked as an ImageList's dry-run job is: the job alone says what it did.
		job.Annotations[eraserv1.AnnotationDryRun] = "true"
	}
	if nodes != nil {
		job.Annotations[eraserv1.AnnotationCatchUp] = "true"
	}
	created, err := jobdata.CreateJob(ctx, r.client, r.namespace, job, jobdata.Data{
		Kind: podspec.KindCollector, DryRun: dryRun, Raw: raw, RemoverImage: r.removerImage, Nodes: nodes,
	})
	if err != nil {
		return err
	}
	if created {
		r.recorder.Eventf(job, corev1.EventTypeNormal, eraserv1.ReasonScheduled, "%s (scanner enabled: %v, dry run: %v)", what, cfg.Components.Scanner.Enabled, dryRun)
	}
	return nil
}

// state reads the schedule's state, creating its ConfigMap before the first
// run so that a run-now request has an object to go on.
func (r *Reconciler) state(ctx context.Context) (State, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: StateName}, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: StateName}}
		if err := r.client.Create(ctx, cm); err != nil {
			return State{}, nil, fmt.Errorf("creating ConfigMap %s: %w", StateName, err)
		}
		return State{}, cm, nil
	}
	if err != nil {
		return State{}, nil, err
	}
	st, err := decodeState(cm.Data, cm.BinaryData)
	if err != nil {
		log.FromContext(ctx).Error(err, "the schedule's per-node record is unreadable; starting it again", "configMap", StateName)
	}
	return st, cm, nil
}

// saveState writes the state. A per-node record too large for the
// ConfigMap is caught here, before the API server would refuse the whole
// update: the state is written without it, and the schedule goes on.
func (r *Reconciler) saveState(ctx context.Context, cm *corev1.ConfigMap, st State) error {
	data, bin, err := encodeState(st, r.stateLimit)
	if errors.Is(err, errStateTooLarge) {
		log.FromContext(ctx).Error(err, "the schedule's state is written without its per-node record", "configMap", StateName)
		r.recorder.Eventf(cm, corev1.EventTypeWarning, eraserv1.ReasonScheduleStateTooLarge, "%v", err)
	} else if err != nil {
		return fmt.Errorf("encoding ConfigMap %s: %w", StateName, err)
	}
	cm.Data, cm.BinaryData = data, bin
	return r.client.Update(ctx, cm)
}

// stateLimit bounds the state ConfigMap's values, a little under the 1 MiB
// the API server allows, with room for its metadata.
const stateLimit = jobdata.MaxSize

// publishLastSuccess gives the metrics the last scheduled success from the
// state: a restarted manager serves it at once, so that the scheduled-runs
// alert still fires when runs keep failing after a restart. Before a first
// success it is when scheduled runs were turned on (alertFrom), so that the
// alert fires on an install whose runs never complete; without either,
// none.
func (r *Reconciler) publishLastSuccess(st State) {
	if at := alertFrom(st); !at.IsZero() {
		r.metrics.JobCompleted("schedule", at)
	} else {
		r.metrics.ForgetLastSuccess("schedule")
	}
}

// holdOnce announces, once per pause, that it holds the schedule: an Event
// on the state ConfigMap, which `kubectl eraser status` shows beside the
// schedule's times.
func (r *Reconciler) holdOnce(ctx context.Context, cm *corev1.ConfigMap, held pauseswitch.State) {
	if r.heldSince.Equal(held.Since) {
		return
	}
	r.heldSince = held.Since
	r.recorder.Event(cm, corev1.EventTypeNormal, eraserv1.ReasonPaused, held.Message("scheduled runs, catch-ups and run-now requests"))
	log.FromContext(ctx).Info("schedule held by the pause switch", "configMap", pauseswitch.Name)
}
