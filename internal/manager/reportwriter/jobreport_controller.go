// Package reportwriter writes each ImageJob's per-node report: as worker pods
// finish, it reads their result lines from the container logs (the only
// place a node's per-image outcomes exist; the termination message holds
// totals) and stores them in ConfigMap shards that outlive the pods, then
// points the job's status.report at them. The ImageJob controller deletes
// the pods only once the report is complete (or has waited long enough).
package reportwriter

import (
	"context"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// LogSource reads a container's log through the API server (pods/log).
type LogSource interface {
	Log(ctx context.Context, namespace, pod, container string, limitBytes int64) (io.ReadCloser, error)
}

// PodLogs is the production LogSource.
type PodLogs struct{ Client kubernetes.Interface }

// Log streams the container's log, at most limitBytes of it.
func (p PodLogs) Log(ctx context.Context, namespace, pod, container string, limitBytes int64) (io.ReadCloser, error) {
	return p.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &limitBytes}).Stream(ctx)
}

// Options are the reconciler's settings that do not change at run time.
type Options struct {
	// Namespace holds worker pods and the report's ConfigMaps.
	Namespace string
}

// Reconciler writes job reports.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	logs      LogSource
	clock     clock.Clock
	opts      Options
	// openTimeout is the constant's, but for tests.
	openTimeout time.Duration
	jobs        sync.Map // job name -> *jobState
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler with its dependencies.
func NewReconciler(c client.Client, apiReader client.Reader, logs LogSource, clk clock.Clock, opts Options) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, logs: logs, clock: clk, opts: opts, openTimeout: openTimeout}
}

// SetupWithManager watches jobs and their pods. Pod events of a big job
// come by the thousand; passes are throttled per job (passInterval).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("jobreport").
		For(&eraserv1.ImageJob{}).
		// Only a finished pod has a log to read: the events of pods being
		// created and started (two of every three) would only wake the
		// job to find it still running.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podspec.JobRequest), builder.WithPredicates(predicate.NewPredicateFuncs(finished))).
		// Log reads are the slow part and run in parallel inside a pass;
		// two jobs' reports may be gathered at once.
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
}

// finished reports a pod that ended.
func finished(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && podspec.Finished(pod)
}

// Tuning of the collection.
const (
	// passInterval is the least time between two passes over a job.
	passInterval = 2 * time.Second
	// fetchWorkers bounds the log reads in flight.
	fetchWorkers = 16
	// fetchBatch is the most nodes read per pass, so that a pass (and the
	// memory it holds) stays bounded on a 10,000-node job.
	fetchBatch = 256
	// openTimeout is the time a log has to start; readTimeout to be read.
	openTimeout = 10 * time.Second
	readTimeout = 30 * time.Second
	// logLimit bounds the bytes read from one container's log.
	logLimit = 32 << 20
	// maxEntries bounds one container's result lines kept in memory.
	maxEntries = 20000
	// flushEntries: pending entries are written once they reach this many,
	// which bounds the manager's memory to a few tens of MiB per job.
	flushEntries = 200000
	// minFlushNodes and the shard cap decide the other flush trigger: at
	// least this many nodes per write, and few enough writes that a
	// 10,000-node job stays within MaxReportConfigMaps shards.
	minFlushNodes = 100
)

// jobState is what this process holds of a job's report between passes.
type jobState struct {
	mu       sync.Mutex
	uid      string
	loaded   bool
	lastPass time.Time
	// written are the nodes stored in shards; next is the next shard index.
	written map[string]bool
	shards  []string
	next    int
	// pending are read but not yet stored.
	pending        []nodereport.Node
	pendingSet     map[string]bool
	pendingEntries int
	// omitted counts nodes left out once the shard cap was reached.
	omitted int
	// failStreak counts log reads failed in a row, failed all the failed
	// reads of the job, lastErr the last one's error; cursor is the node
	// of the last probe that succeeded (gather).
	failStreak int
	failed     int
	lastErr    string
	cursor     string
	// fruitless counts the probes in a row that read no log (probe).
	fruitless int
	// nodes is the job's node list, nil when it is gone (nodesRead).
	nodes     *jobdata.Nodes
	nodesRead bool
}

// The report's shards are created and deleted; pods' logs are read.
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=eraser.sh,resources=imagejobs/status,verbs=patch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create;delete

// Reconcile gathers the nodes that finished since the last pass. Its steps,
// by the names their errors carry: get (the job), load (the report written
// so far, once), nodes (the job's node list), pods (the job's), then the
// logs read and flush (the nodes gathered, into the report's shards).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &eraserv1.ImageJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.jobs.Delete(req.Name)
		}
		return reconcile.Result{}, reconcilestep.Wrap("get", client.IgnoreNotFound(err))
	}
	if !job.DeletionTimestamp.IsZero() || job.Status.Phase == "" || job.Status.Phase == eraserv1.PhaseRunning {
		// Logs are read once the job has finished: its pods stay until the
		// report is complete, and reading thousands of logs while pods are
		// still being created would slow the run the user waits for. The
		// job's status update to Completed or Failed brings it here.
		return reconcile.Result{}, nil
	}
	if rep := job.Status.Report; rep != nil && rep.Complete {
		r.jobs.Delete(job.Name)
		return reconcile.Result{}, nil
	}
	st := r.state(job)
	st.mu.Lock()
	defer st.mu.Unlock()
	if wait := st.lastPass.Add(passInterval).Sub(r.clock.Now()); wait > 0 {
		// A pass reads every pod of the job: one per interval sees all the
		// pod events in between.
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	st.lastPass = r.clock.Now()
	if !st.loaded {
		if err := r.load(ctx, job, st); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("load", err)
		}
	}
	if err := r.nodes(ctx, job, st); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("nodes", err)
	}
	var list corev1.PodList
	if err := r.client.List(ctx, &list, client.InNamespace(r.opts.Namespace), client.MatchingLabels{podspec.LabelJob: job.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("pods", err)
	}
	pods := ours(list.Items, job.UID)
	// Finished pods first; those the job judged before they finished (a
	// failed worker's siblings wait on) last, once no finished one is left.
	todo, final := Todo(pods, st.written, st.pendingSet), false
	if len(todo) == 0 {
		todo, final = Unfinished(pods, st.written, st.pendingSet), true
	}
	read := r.gather(ctx, todo, st)
	failure := failures(job, st.nodes)
	for _, n := range read {
		if final {
			unfinished(&n, failure)
		}
		st.pending = append(st.pending, n)
		st.pendingSet[n.Name] = true
		st.pendingEntries += len(n.Entries)
	}
	more := len(todo) > len(read) || !final && len(Unfinished(pods, st.written, st.pendingSet)) > 0
	complete := !more
	if complete {
		// Every node of the job is in the report: those without a log
		// (failed without a pod, never reached, skipped, pod gone) with
		// the reason.
		for _, n := range Missing(job, st.nodes, st.written, st.pendingSet) {
			st.pending = append(st.pending, n)
			st.pendingSet[n.Name] = true
		}
	}
	if complete || st.pendingEntries >= flushEntries || len(st.pending) >= flushNodes(job) {
		if err := r.flush(ctx, job, st, complete); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("flush", err)
		}
	}
	if more {
		// Finished pods remain unread: straight on, after the interval.
		return reconcile.Result{RequeueAfter: passInterval}, nil
	}
	return reconcile.Result{}, nil
}

// flushNodes is the pending node count that triggers a write.
func flushNodes(job *eraserv1.ImageJob) int {
	return max(minFlushNodes, job.Status.Desired/(eraserv1.MaxReportConfigMaps*3/4))
}

func (r *Reconciler) state(job *eraserv1.ImageJob) *jobState {
	if v, ok := r.jobs.Load(job.Name); ok && v.(*jobState).uid == string(job.UID) {
		return v.(*jobState)
	}
	st := &jobState{uid: string(job.UID), written: map[string]bool{}, pendingSet: map[string]bool{}}
	r.jobs.Store(job.Name, st)
	return st
}

// load reads the shards written before (by this process or an earlier
// leader) from the API server: the cache may lag behind a write.
func (r *Reconciler) load(ctx context.Context, job *eraserv1.ImageJob, st *jobState) error {
	shards, err := reportshards.Shards(ctx, r.apiReader, r.opts.Namespace, job)
	if err != nil {
		return err
	}
	for _, cm := range shards {
		for _, n := range nodereport.ParseNodeList(cm.Data[nodereport.KeyNodes]) {
			st.written[n] = true
		}
		st.shards = append(st.shards, cm.Name)
		// An index create passed by leaves a gap: next follows the last.
		st.next = nodereport.ShardIndex(cm.Name) + 1
	}
	st.loaded = true
	return nil
}
