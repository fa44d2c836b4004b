// Package schedule runs scheduled (collector) jobs when
// components.collector.enabled: every repeatInterval after the previous run
// ended, or at the times of a cron expression, never two at once. Its state
// (last start and end) lives in a ConfigMap, so a restarted manager adopts a
// running job and keeps the rhythm instead of starting a run per restart.
package schedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/configstore"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/podspec"
)

// StateName is the ConfigMap holding the schedule's state.
const StateName = "eraser-schedule-state"

const (
	keyLastStart = "lastStart"
	keyLastEnd   = "lastEnd"
)

// key is the one request this controller handles.
var key = reconcile.Request{NamespacedName: types.NamespacedName{Name: "schedule"}}

// Reconciler starts scheduled jobs.
type Reconciler struct {
	client       client.Client
	recorder     record.EventRecorder
	clock        clock.Clock
	store        *configstore.Store
	namespace    string
	removerImage string
	started      time.Time
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler; started is when the manager started.
func NewReconciler(c client.Client, recorder record.EventRecorder, clk clock.Clock, store *configstore.Store, namespace, removerImage string) *Reconciler {
	return &Reconciler{client: c, recorder: recorder, clock: clk, store: store, namespace: namespace, removerImage: removerImage, started: clk.Now()}
}

// SetupWithManager wakes the schedule when a scheduled job changes, when the
// configuration changes (enabling the collector takes effect at once), and
// once at start.
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
		Complete(r)
}

// The schedule's state lives in one ConfigMap, created once and then
// updated; jobs are created and patched to mark them recorded.
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile records finished runs, and starts the next one when it is due.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	cfg, raw, _ := r.store.Get()
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
		return reconcile.Result{}, err
	}
	st, cm, err := r.state(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	changed := false
	var finished []*eraserv1.ImageJob
	for i := range jobs.Items {
		j := &jobs.Items[i]
		switch j.Status.Phase {
		case "", eraserv1.PhaseRunning:
			// Skip while a run is going; its end wakes us.
			return reconcile.Result{}, nil
		default:
			if ct := j.Status.CompletionTime; ct != nil && ct.After(st.LastEnd) {
				st.LastEnd = ct.Time
				changed = true
			}
			if j.Annotations[eraserv1.AnnotationRecorded] == "" {
				finished = append(finished, j)
			}
		}
	}
	if changed {
		if err := r.saveState(ctx, cm, st); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Only now may the finished jobs be cleaned up.
	for _, j := range finished {
		patch := client.MergeFrom(j.DeepCopy())
		if j.Annotations == nil {
			j.Annotations = map[string]string{}
		}
		j.Annotations[eraserv1.AnnotationRecorded] = "true"
		if err := r.client.Patch(ctx, j, patch); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	if !cfg.Components.Collector.Enabled {
		// A configuration change wakes us if it enables the collector.
		return reconcile.Result{}, nil
	}
	now := r.clock.Now()
	next := NextRun(cfg.Manager.Scheduling, st, r.started)
	if next.After(now) {
		// Nothing else will wake us when the time comes.
		return reconcile.Result{RequeueAfter: next.Sub(now)}, nil
	}

	dryRun := cfg.Manager.Scheduling.DryRun
	job := &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{
		// Named after the slot, so two replicas or a restart cannot start it twice.
		Name:   fmt.Sprintf("imagejob-scheduled-%d", next.Unix()),
		Labels: map[string]string{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector},
	}}
	if dryRun {
		// Marked as an ImageList's dry-run job is: the job alone says what it did.
		job.Annotations = map[string]string{eraserv1.AnnotationDryRun: "true"}
	}
	if _, err := jobdata.CreateJob(ctx, r.client, r.namespace, job, jobdata.Data{
		Kind: podspec.KindCollector, DryRun: dryRun, Raw: raw, RemoverImage: r.removerImage,
	}); err != nil {
		return reconcile.Result{}, err
	}
	st.LastStart = now
	if err := r.saveState(ctx, cm, st); err != nil {
		return reconcile.Result{}, err
	}
	r.recorder.Eventf(job, corev1.EventTypeNormal, "Scheduled", "scheduled run started (scanner enabled: %v, dry run: %v)", cfg.Components.Scanner.Enabled, dryRun)
	return reconcile.Result{}, nil
}

func (r *Reconciler) state(ctx context.Context) (State, *corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: StateName}, cm)
	if apierrors.IsNotFound(err) {
		return State{}, nil, nil
	}
	if err != nil {
		return State{}, nil, err
	}
	var st State
	st.LastStart, _ = time.Parse(time.RFC3339, cm.Data[keyLastStart])
	st.LastEnd, _ = time.Parse(time.RFC3339, cm.Data[keyLastEnd])
	return st, cm, nil
}

func (r *Reconciler) saveState(ctx context.Context, cm *corev1.ConfigMap, st State) error {
	data := map[string]string{}
	if !st.LastStart.IsZero() {
		data[keyLastStart] = st.LastStart.UTC().Format(time.RFC3339)
	}
	if !st.LastEnd.IsZero() {
		data[keyLastEnd] = st.LastEnd.UTC().Format(time.RFC3339)
	}
	if cm == nil {
		return r.client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: StateName}, Data: data})
	}
	cm.Data = data
	return r.client.Update(ctx, cm)
}
