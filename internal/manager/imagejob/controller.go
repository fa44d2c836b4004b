// Package imagejob runs an ImageJob: it picks the eligible nodes, creates one
// worker pod per node (in waves when configured), fails pods that do not
// start or finish in time, reads each remover's results, decides the job's
// outcome by the success ratio, and cleans up after the configured delay.
package imagejob

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
)

// Options are the reconciler's settings that do not change at run time.
type Options struct {
	// Namespace holds worker pods and job ConfigMaps.
	Namespace string
	// LogLevel is passed to the workers.
	LogLevel string
	// PullSecrets are added to every worker pod's image pull secrets.
	PullSecrets []string
	// References are the images the cluster references, snapshotted into
	// each wave's data when the configuration protects them.
	References References
	// ScanService is where the run's scanners share verdicts (the leader's
	// scan service); empty, each node scans alone.
	ScanService string
	// ScanDBs is the leader's copy of the vulnerability DB, which the scan
	// service hands to the run's scanners; nil, each node fetches its own.
	ScanDBs ScanDBs
	// Config is the configuration in force, whose bound on all reports
	// together applies to every job, whichever configuration it ran with;
	// nil bounds none.
	Config *eraserconfig.Store
}

// Reconciler runs ImageJobs.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	// cached reads the job's pods and the nodes in place (a pass visits
	// every one of them; a List would copy them all).
	cached   *cacheopts.Stores
	recorder record.EventRecorder
	clock    clock.Clock
	metrics  *metrics.Recorder
	opts     Options
	// jobs is this process's memory of each running job (jobState).
	jobs sync.Map
	// skew is measured on the pods this process creates (clock.go).
	skew skewMeter
	// queue shares the nodes among every job's passes (nodequeue).
	queue *nodequeue.Queue
	// lastSweep is the last look at all reports (reportbound.go).
	sweepMu   sync.Mutex
	lastSweep time.Time
}

// passInterval is the least time between two passes over a running job.
const passInterval = 500 * time.Millisecond

// throttle returns how long to wait before the job's next pass, or 0 and
// records the pass.
func (r *Reconciler) throttle(st *jobState) time.Duration {
	now := r.clock.Now()
	if wait := st.lastPass.Add(passInterval).Sub(now); wait > 0 {
		return wait
	}
	st.lastPass = now
	return 0
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler with its dependencies.
// The Stores must be those of the cache the client reads through.
func NewReconciler(c client.Client, apiReader client.Reader, cached *cacheopts.Stores, recorder record.EventRecorder, clk clock.Clock, m *metrics.Recorder, opts Options) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, cached: cached, recorder: recorder, clock: clk, metrics: m, opts: opts, queue: nodequeue.New(workers{cached})}
}

// SetupWithManager watches jobs, their pods, and node deletions (a deleted
// node's pod may never report again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagejob").
		For(&eraserv1.ImageJob{}).
		// By the job label, not the owner reference: thousands of pod
		// events per run, and resolving each owner's kind costs a REST
		// mapping per event. A worker that ends also wakes the jobs
		// queued for a node or for room (queue.go).
		Watches(&corev1.Pod{}, podEvents{r.queue}).
		// The job's ConfigMap is created right after the job: its arrival
		// starts the job without waiting for a requeue.
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Node{}, handler.TypedFuncs[client.Object, reconcile.Request]{DeleteFunc: r.nodeDeleted}).
		// Resuming goes on with every running job's next wave.
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.runningJobs), builder.WithPredicates(pause.Switch(r.opts.Namespace))).
		// A job's cleanup (thousands of pods, a page at a time) must not
		// hold up the next job's start; one job is never worked on twice
		// at once (the work queue), and each job's memory has its lock.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// runningJobs are the jobs to wake on a change of the pause switch.
func (r *Reconciler) runningJobs(ctx context.Context, _ client.Object) []reconcile.Request {
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, j := range jobs.Items {
		if j.Status.Phase == eraserv1.PhaseRunning || j.Status.Phase == "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: j.Name}})
		}
	}
	return out
}

// nodeDeleted wakes every running job (the node's pod may never report
// again) and drops the node's metric series.
func (r *Reconciler) nodeDeleted(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r.metrics.ForgetNode(e.Object.GetName())
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs); err != nil {
		return
	}
	for _, j := range jobs.Items {
		if j.Status.Phase == eraserv1.PhaseRunning {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: j.Name}})
		}
	}
}

// Pods and the nodes snapshot carry a blocking owner reference to their job,
// which clusters with the OwnerReferencesPermissionEnforcement admission
// plugin allow only to who may update the job's finalizers. Events are
// cluster-wide because an ImageJob's go to namespace "default".
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs/status,verbs=update
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=pods,verbs=get;list;watch;create;delete;deletecollection
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile moves one job forward. Its steps, by the names their errors
// carry: get (the job), then the step of its phase: start (a new job's
// nodes fixed, then its first pass), run (a pass, pass.go), or
// cleanup (a finished job's pods, report and the job itself, after their
// delays).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &eraserv1.ImageJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, reconcilestep.Wrap("get", err)
	}
	if !job.DeletionTimestamp.IsZero() {
		r.forget(job.Name)
		return reconcile.Result{}, nil
	}
	if err := r.boundReports(ctx); err != nil {
		// This job's pass goes on; the next look, a sweep interval on,
		// tries again.
		log.FromContext(ctx).Error(err, "keeping the reports within manager.imageJob.cleanup.maxReportSize")
	}
	name, do := "cleanup", r.cleanup
	switch job.Status.Phase {
	case "":
		name, do = "start", r.start
	case eraserv1.PhaseRunning:
		name, do = "run", r.run
	}
	res, err := do(ctx, job)
	return reconcilestep.RequeueOnConflict(ctx, res, reconcilestep.Wrap(name, err))
}

// data reads the job's data, from the API server when the cache does not
// have it yet (it was created a moment ago).
func (r *Reconciler) data(ctx context.Context, job *eraserv1.ImageJob) (*jobdata.Data, error) {
	d, err := jobdata.Get(ctx, r.client, r.opts.Namespace, job)
	if apierrors.IsNotFound(err) {
		d, err = jobdata.Get(ctx, r.apiReader, r.opts.Namespace, job)
	}
	return d, err
}

// nodes reads the job's node list, likewise.
func (r *Reconciler) nodes(ctx context.Context, job *eraserv1.ImageJob) (jobdata.Nodes, error) {
	n, err := jobdata.GetNodes(ctx, r.client, r.opts.Namespace, job)
	if apierrors.IsNotFound(err) {
		n, err = jobdata.GetNodes(ctx, r.apiReader, r.opts.Namespace, job)
	}
	return n, err
}

// load reads the job's data and node list. Data that is gone or unusable
// ends the job (done); anything else (the API server busy, say) is retried.
func (r *Reconciler) load(ctx context.Context, job *eraserv1.ImageJob) (*jobdata.Data, jobdata.Nodes, bool, error) {
	data, err := r.data(ctx, job)
	if apierrors.IsNotFound(err) || errors.Is(err, jobdata.ErrInvalid) {
		return nil, jobdata.Nodes{}, true, r.fail(ctx, job, eraserv1.ReasonConfigMissing, "reading the job's ConfigMap: "+err.Error())
	}
	if err != nil {
		return nil, jobdata.Nodes{}, false, err
	}
	nodes, err := r.nodes(ctx, job)
	if apierrors.IsNotFound(err) {
		return nil, jobdata.Nodes{}, true, r.fail(ctx, job, eraserv1.ReasonNodesMissing, "reading the job's node list: "+err.Error())
	}
	return data, nodes, false, err
}
