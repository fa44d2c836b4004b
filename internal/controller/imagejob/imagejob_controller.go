// Package imagejob runs an ImageJob: it picks the eligible nodes, creates one
// worker pod per node (in waves when configured), fails pods that do not
// start or finish in time, reads each remover's results, decides the job's
// outcome by the success ratio, and cleans up after the configured delay.
package imagejob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cacheopts"
	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/metrics"
	"github.com/eraser-oss/eraser/internal/nodefilter"
	"github.com/eraser-oss/eraser/internal/nodereport"
	"github.com/eraser-oss/eraser/internal/podspec"
)

// Options are the reconciler's settings that do not change at run time.
type Options struct {
	// Namespace holds worker pods and job ConfigMaps.
	Namespace string
	// LogLevel is passed to the workers.
	LogLevel string
	// PullSecrets are added to every worker pod's image pull secrets.
	PullSecrets []string
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
	return &Reconciler{client: c, apiReader: apiReader, cached: cached, recorder: recorder, clock: clk, metrics: m, opts: opts}
}

// SetupWithManager watches jobs, their pods, and node deletions (a deleted
// node's pod may never report again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagejob").
		For(&eraserv1.ImageJob{}).
		// By the job label, not the owner reference: thousands of pod
		// events per run, and resolving each owner's kind costs a REST
		// mapping per event.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podspec.JobRequest)).
		// The job's ConfigMap is created right after the job: its arrival
		// starts the job without waiting for a requeue.
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Node{}, handler.TypedFuncs[client.Object, reconcile.Request]{DeleteFunc: r.nodeDeleted}).
		// A job's cleanup (thousands of pods, a page at a time) must not
		// hold up the next job's start; one job is never worked on twice
		// at once (the work queue), and each job's memory has its lock.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
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

// Reconcile moves one job forward.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &eraserv1.ImageJob{}
	if err := r.client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
		r.forget(job.Name)
		return reconcile.Result{}, nil
	}
	switch job.Status.Phase {
	case "":
		return r.start(ctx, job)
	case eraserv1.PhaseRunning:
		return r.run(ctx, job)
	default:
		return r.cleanup(ctx, job)
	}
}

// data reads the job's data, from the API server when the cache does not
// have it yet (it was created a moment ago).
func (r *Reconciler) data(ctx context.Context, job string) (*jobdata.Data, error) {
	d, err := jobdata.Get(ctx, r.client, r.opts.Namespace, job)
	if apierrors.IsNotFound(err) {
		d, err = jobdata.Get(ctx, r.apiReader, r.opts.Namespace, job)
	}
	return d, err
}

// nodes reads the job's node list, likewise.
func (r *Reconciler) nodes(ctx context.Context, job string) (jobdata.Nodes, error) {
	n, err := jobdata.GetNodes(ctx, r.client, r.opts.Namespace, job)
	if apierrors.IsNotFound(err) {
		n, err = jobdata.GetNodes(ctx, r.apiReader, r.opts.Namespace, job)
	}
	return n, err
}

// start fixes the job's nodes, marks it Running and starts the first wave.
func (r *Reconciler) start(ctx context.Context, job *eraserv1.ImageJob) (reconcile.Result, error) {
	data, err := r.data(ctx, job.Name)
	if apierrors.IsNotFound(err) {
		if r.clock.Since(job.CreationTimestamp.Time) < time.Minute {
			// The owner creates the job first and its ConfigMap right after;
			// the ConfigMap's arrival brings the job back (Owns). The requeue
			// only covers a lost event.
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
		return reconcile.Result{}, r.fail(ctx, job, "ConfigMissing", "the job's ConfigMap "+job.Name+" does not exist")
	}
	if errors.Is(err, jobdata.ErrInvalid) {
		return reconcile.Result{}, r.fail(ctx, job, "InvalidJobData", err.Error())
	}
	if err != nil {
		return reconcile.Result{}, err
	}

	nodes, err := r.nodes(ctx, job.Name)
	if apierrors.IsNotFound(err) {
		var list corev1.NodeList
		if err := r.client.List(ctx, &list); err != nil {
			return reconcile.Result{}, err
		}
		targets, skipped, err := nodefilter.Select(list.Items, nodefilter.RulesFor(data.Kind == podspec.KindCollector, data.Config))
		if err != nil {
			return reconcile.Result{}, r.fail(ctx, job, "InvalidNodeFilter", err.Error())
		}
		nodes = jobdata.Nodes{Targets: targets, Skipped: skipped}
		if err := jobdata.CreateNodes(ctx, r.client, r.opts.Namespace, job, nodes); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
	} else if err != nil {
		return reconcile.Result{}, err
	}

	now := metav1.NewTime(r.clock.Now())
	job.Status.Phase = eraserv1.PhaseRunning
	job.Status.Desired = len(nodes.Targets) + len(nodes.Skipped)
	job.Status.Skipped = len(nodes.Skipped)
	job.Status.StartTime = &now
	job.Status.ObservedGeneration = job.Generation
	setRunning(job, len(nodes.Targets), nodes.Skipped)
	if err := r.client.Status().Update(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	r.recorder.Eventf(job, corev1.EventTypeNormal, "Started", "running on %d nodes (%d skipped)", len(nodes.Targets), len(nodes.Skipped))
	// Straight on to the first wave, rather than waiting for the status
	// update to come back as an event.
	return r.run(ctx, job)
}

// run is one pass over a running job: gather what the cluster says, observe
// the nodes (pure), plan the next wave (pure), create its pods, and write
// the status once.
func (r *Reconciler) run(ctx context.Context, job *eraserv1.ImageJob) (reconcile.Result, error) {
	st := r.state(job)
	st.mu.Lock()
	defer st.mu.Unlock()
	// The job's data and node list are immutable: read and parsed once.
	if st.data == nil {
		data, nodes, done, err := r.load(ctx, job)
		if done || err != nil {
			return reconcile.Result{}, err
		}
		st.loaded(job, data, nodes)
	}
	data, nodes := st.data, st.nodes
	// A pass reads every pod of the job; on thousands of nodes, pod events
	// would run it back to back. One pass per interval sees them all. After
	// a failed pass the error's own backoff decides instead: a throttle's
	// requeue would reset it, and an API server that is down would be
	// asked again every interval.
	if wait := r.throttle(st); wait > 0 && !st.erred {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	res, err := r.pass(ctx, job, data, nodes, st)
	st.erred = err != nil
	return res, err
}

// pass is one pass over a running job, with its memory locked.
func (r *Reconciler) pass(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, nodes jobdata.Nodes, st *jobState) (reconcile.Result, error) {
	w, err := r.gather(ctx, job, data.Config, data.Kind == podspec.KindCollector, nodes, st)
	if err != nil {
		return reconcile.Result{}, err
	}
	o := observe(w)
	p := plan(w, o)
	if len(p.create) > 0 {
		// Exclusion lists are read as each wave is created, not when the
		// job was: a list added during a long rolling job protects the
		// nodes not reached yet, and one deleted is not mounted (its pods
		// would never start).
		if data.Exclusions, err = jobdata.ExclusionLists(ctx, r.client, r.opts.Namespace); err != nil {
			return reconcile.Result{}, err
		}
	}
	build := r.builder(job, data)
	if len(p.create) > 0 {
		// Checked once here, so that a bad configuration fails the job
		// rather than every node.
		if _, err := build(p.create[0], w.targets[p.create[0]]); err != nil {
			return reconcile.Result{}, r.fail(ctx, job, "InvalidPodSpec", err.Error())
		}
	}
	errs := r.createPods(ctx, w.targets, p.create, build)
	if msg, all := refusedAll(errs); all && len(w.pods) == 0 && len(st.created) == 0 {
		// Not one worker pod of this job exists and the API server refused
		// every one it was sent: retrying node by node only delays the news.
		job.Status.Failed = len(w.targets)
		return reconcile.Result{}, r.fail(ctx, job, ReasonPodsRefused, "the API server refused the worker pods: "+msg)
	}
	r.recordCreates(job, st, w, p, errs)
	if len(p.create) > 0 || len(p.failed) > 0 {
		// Judged again with the wave in place: one set of rules counts
		// every node, whether it was reached by this wave or an earlier one.
		w = advance(w, p, errs)
		o = observe(w)
	}
	maps.Copy(st.failures, w.failures)
	maps.Copy(st.failures, o.newFailures)
	before := job.Status.DeepCopy()
	finished := r.compose(job, data.Config, nodes, o.progress, st.failures)
	// A pass that changed nothing writes nothing: on a long run most passes
	// only wait for pods.
	if finished || !apiequality.Semantic.DeepEqual(before, &job.Status) {
		if err := r.client.Status().Update(ctx, job); err != nil {
			return reconcile.Result{}, err
		}
	}
	r.afterUpdate(ctx, job, st, o.timedOut)
	if finished {
		r.announce(job, o.perNode)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: wakeUp(w, o, p, st)}, nil
}

// load reads the job's data and node list. Data that is gone or unusable
// ends the job (done); anything else (the API server busy, say) is retried.
func (r *Reconciler) load(ctx context.Context, job *eraserv1.ImageJob) (*jobdata.Data, jobdata.Nodes, bool, error) {
	data, err := r.data(ctx, job.Name)
	if apierrors.IsNotFound(err) || errors.Is(err, jobdata.ErrInvalid) {
		return nil, jobdata.Nodes{}, true, r.fail(ctx, job, "ConfigMissing", "reading the job's ConfigMap: "+err.Error())
	}
	if err != nil {
		return nil, jobdata.Nodes{}, false, err
	}
	nodes, err := r.nodes(ctx, job.Name)
	if apierrors.IsNotFound(err) {
		return nil, jobdata.Nodes{}, true, r.fail(ctx, job, "NodesMissing", "reading the job's node list: "+err.Error())
	}
	return data, nodes, false, err
}

// gather reads what one pass needs: the job's pods and the nodes from the
// cache, and, for started nodes whose pod the cache lacks and nothing
// explains, the API server's word.
func (r *Reconciler) gather(ctx context.Context, job *eraserv1.ImageJob, cfg *config.Config, scheduled bool, nodes jobdata.Nodes, st *jobState) (world, error) {
	now := r.clock.Now()
	w := world{
		targets: nodes.Targets, started: min(job.Status.Started, len(nodes.Targets)),
		pods: map[string]*corev1.Pod{}, pending: map[string]bool{}, missing: map[string]bool{}, nodes: map[string]bool{},
		finished: make(map[string]outcome, len(st.finished)),
		failures: st.failures, creating: st.creating, now: now,
		// A scanning run's pods may outlive podRunTimeout: config.Waits.
		timeouts: timeouts{start: cfg.Manager.ImageJob.PodStartTimeout, run: cfg.Waits(scheduled).PodRun},
		limit:    cfg.Manager.ImageJob.MaxConcurrentNodes.Of(len(nodes.Targets)),
	}
	// Read in place: the cache's own pods, never modified here.
	pods, err := r.cached.JobPods(job.Name)
	if err != nil {
		return w, fmt.Errorf("reading job %s's pods from the cache: %w", job.Name, err)
	}
	for _, pod := range pods {
		if pod.Namespace != r.opts.Namespace {
			continue
		}
		node := pod.Spec.NodeName
		w.pods[node] = pod
		delete(st.created, node)
		if podspec.Finished(pod) {
			// A finished pod's outcome depends on the pod alone: judged
			// (and its termination messages decoded) once per version.
			m, ok := st.finished[node]
			if !ok || m.version != pod.ResourceVersion {
				m = judged{version: pod.ResourceVersion, out: classify(pod, now, w.timeouts, true)}
				st.finished[node] = m
			}
			w.finished[node] = m.out
		}
	}
	// Every node's, finished ones included: a finished pod's outcome counts
	// for the node's metrics only while the node exists (observe.outcome).
	for _, target := range w.targets {
		ok, err := r.cached.NodeExists(target.Name)
		if err != nil {
			return w, fmt.Errorf("reading node %s from the cache: %w", target.Name, err)
		}
		if ok {
			w.nodes[target.Name] = true
		}
	}
	for node := range st.created {
		if st.expected(node, now) {
			w.pending[node] = true
		}
	}
	for _, node := range unconfirmed(w) {
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: podspec.PodName(job.Name, node)}, &corev1.Pod{})
		switch {
		case err == nil:
			w.pending[node] = true
		case apierrors.IsNotFound(err):
			w.missing[node] = true
		default:
			return w, err
		}
	}
	return w, nil
}

// builder returns the function that builds one node's pod for the job.
func (r *Reconciler) builder(job *eraserv1.ImageJob, data *jobdata.Data) func(int, nodefilter.Target) (*corev1.Pod, error) {
	return func(index int, target nodefilter.Target) (*corev1.Pod, error) {
		return podspec.Build(podspec.Params{
			Batch: index / cleanupBatch,
			Job:   job.Name, JobUID: job.UID, Kind: data.Kind, Node: target.Name, OS: target.OS,
			Namespace: r.opts.Namespace, Config: data.Config, ConfigMap: job.Name, ConfigKey: jobdata.ConfigKey,
			Exclusions: data.Exclusions, LogLevel: r.opts.LogLevel, DryRun: data.DryRun, PullSecrets: r.opts.PullSecrets,
		})
	}
}

// recordCreates remembers the wave's created pods and its refusals (with
// their backoff), logging each refusal and announcing each distinct one.
func (r *Reconciler) recordCreates(job *eraserv1.ImageJob, st *jobState, w world, p wave, errs []error) {
	for k, i := range p.create {
		node := w.targets[i].Name
		if errs[k] == nil {
			st.created[node] = w.now
			delete(st.creating, node)
			continue
		}
		prev, had := st.creating[node]
		st.creating[node] = refused(prev, had, w.now, errs[k].Error())
		msg := apiMessage(errs[k])
		if !st.refusals[msg] && len(st.refusals) < maxRefusalEvents {
			st.refusals[msg] = true
			r.recorder.Eventf(job, corev1.EventTypeWarning, ReasonCreateFailed,
				"creating worker pods: %s (retried with backoff; a node fails once its pod is not created within the start timeout)", truncate(msg))
		}
	}
}

// advance is the world once the wave's creations are known: the cursor
// stops at the first node whose pod could not be created, so that it is
// retried; created pods are pending until the cache shows them, and nodes
// ended without a pod are failures on record.
func advance(w world, p wave, errs []error) world {
	end := p.started
	for k, i := range p.create {
		if errs[k] != nil {
			end = i
			break
		}
	}
	next := w
	next.started = end
	next.failures = maps.Clone(w.failures)
	maps.Copy(next.failures, p.failed)
	next.pending = maps.Clone(w.pending)
	for k, i := range p.create {
		if errs[k] == nil {
			next.pending[w.targets[i].Name] = true
		}
	}
	return next
}

// compose writes the pass's figures into the job's status and says whether
// the job has finished.
func (r *Reconciler) compose(job *eraserv1.ImageJob, cfg *config.Config, nodes jobdata.Nodes, p progress, failures map[string]eraserv1.NodeFailure) bool {
	job.Status.Started = p.started
	job.Status.Succeeded = p.succeeded
	job.Status.Failed = p.failed
	job.Status.Results = &p.results
	job.Status.FailedNodes = boundedFailures(failures)
	job.Status.FailedIndexes = encodeFailures(nodes.Targets, failures)
	job.Status.ObservedGeneration = job.Generation
	finished := p.started == p.eligible && p.active == 0
	if finished {
		r.finish(job, p, cfg)
	} else {
		setRunning(job, p.eligible, nodes.Skipped)
	}
	return finished
}

// afterUpdate acts on what the status now records: timed-out pods are
// deleted and each new failure is announced, once.
func (r *Reconciler) afterUpdate(ctx context.Context, job *eraserv1.ImageJob, st *jobState, timedOut []*corev1.Pod) {
	for _, pod := range timedOut {
		if err := r.client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Error(err, "deleting a timed-out pod", "pod", pod.Name)
		}
	}
	var fresh []eraserv1.NodeFailure
	for node, f := range st.failures {
		if !st.announced[node] {
			st.announced[node] = true
			fresh = append(fresh, f)
		}
	}
	if len(fresh) == 0 {
		return
	}
	slices.SortFunc(fresh, func(a, b eraserv1.NodeFailure) int { return strings.Compare(a.Node, b.Node) })
	text := failuresText(fresh)
	log.FromContext(ctx).Info("nodes failed", "count", len(fresh), "nodes", text)
	// One Event per pass, a few per job: the event recorder drops an
	// object's Events past a small budget, and the job's outcome Event
	// must still get through. The status counts every failure.
	if st.failureEvents < maxFailureEvents {
		st.failureEvents++
		r.recorder.Eventf(job, corev1.EventTypeWarning, "NodeFailed", "%d node(s) failed: %s", len(fresh), text)
	}
}

// Event budgets per job (see afterUpdate).
const (
	maxFailureEvents = 8
	maxRefusalEvents = 4
)

// failuresText names a few failures with their reason and message.
func failuresText(fs []eraserv1.NodeFailure) string {
	const shown = 5
	var parts []string
	for _, f := range fs[:min(len(fs), shown)] {
		parts = append(parts, fmt.Sprintf("%s (%s: %s)", f.Node, f.Reason, f.Message))
	}
	text := strings.Join(parts, "; ")
	if more := len(fs) - shown; more > 0 {
		text += fmt.Sprintf("; and %d more", more)
	}
	return truncate(text)
}

// wakeUp is when the job needs a pass that no event will bring: a pod's
// timeout, or a node's creation backoff. Pod events drive the rest.
func wakeUp(w world, o observation, p wave, st *jobState) time.Duration {
	next := o.next
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	earliest(p.wake)
	for _, cf := range st.creating {
		earliest(cf.next)
	}
	if len(p.create) > 0 && w.timeouts.start > 0 {
		earliest(w.now.Add(w.timeouts.start))
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(w.now), time.Second)
}

// createWorkers bounds the pod creations in flight: enough to fan out
// thousands of nodes in seconds without flooding the API server. The API
// server is the bottleneck (make bench-manager): 32 in flight made fan-out
// slower on 2 cores than 16, by contention.
const createWorkers = 16

// createPods builds and creates the pods of the targets at the indexes in
// parallel (built one at a time, so a 5,000-node wave is never in memory at
// once) and returns one error per index; an existing pod (from before a
// restart) counts as created.
func (r *Reconciler) createPods(ctx context.Context, targets []nodefilter.Target, create []int, build func(int, nodefilter.Target) (*corev1.Pod, error)) []error {
	errs := make([]error, len(create))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(createWorkers, len(create)) {
		wg.Go(func() {
			for k := range work {
				pod, err := build(create[k], targets[create[k]])
				if err == nil {
					err = r.client.Create(ctx, pod)
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs[k] = fmt.Errorf("creating the pod for node %s: %w", targets[create[k]].Name, err)
				}
			}
		})
	}
	for k := range create {
		work <- k
	}
	close(work)
	wg.Wait()
	return errs
}

// refusedAll reports whether every creation failed and every failure is a
// refusal that retrying cannot change (admission, validation), with the
// first one's message.
func refusedAll(errs []error) (string, bool) {
	if len(errs) == 0 {
		return "", false
	}
	for _, err := range errs {
		if err == nil || !permanent(err) {
			return "", false
		}
	}
	return apiMessage(errs[0]), true
}

// permanent refusals: Pod Security and other admission (Forbidden), an
// invalid pod or a missing PriorityClass (Invalid, Forbidden), a missing
// namespace. A quota refusal is Forbidden too: a whole wave refused by a
// quota fails fast with the quota's message.
func permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// apiMessage is the API server's own message, without the node's name, so
// that one refusal of many nodes reads as one.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		st := status.Status()
		if d := st.Details; d != nil && d.Name != "" {
			return strings.Replace(st.Message, `"`+d.Name+`" `, "", 1)
		}
		return st.Message
	}
	return err.Error()
}

// finish decides the outcome: the success ratio is over the nodes the job was
// meant to run on, in floating point; skipped nodes are not successes.
func (r *Reconciler) finish(job *eraserv1.ImageJob, p progress, cfg *config.Config) {
	now := metav1.NewTime(r.clock.Now())
	job.Status.CompletionTime = &now
	ratio := 1.0
	if p.eligible > 0 {
		ratio = float64(p.succeeded) / float64(p.eligible)
	}
	delay := cfg.Manager.ImageJob.Cleanup.DelayOnSuccess
	if ratio >= cfg.Manager.ImageJob.SuccessRatio {
		job.Status.Phase = eraserv1.PhaseCompleted
	} else {
		job.Status.Phase = eraserv1.PhaseFailed
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

// fail ends a job that cannot run at all.
func (r *Reconciler) fail(ctx context.Context, job *eraserv1.ImageJob, reason, message string) error {
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
		return err
	}
	r.recorder.Event(job, corev1.EventTypeWarning, reason, message)
	r.metrics.JobFinished(0, job.Status.Succeeded, job.Status.Failed, nil)
	return nil
}

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
	if owner := job.Labels[eraserv1.LabelJobOwner]; (owner == eraserv1.JobOwnerImageList || owner == eraserv1.JobOwnerCollector) &&
		job.Annotations[eraserv1.AnnotationRecorded] == "" {
		// The owner (the ImageList, or the schedule, which measures the next
		// run from this one's end) annotates the job once it has recorded
		// it; the annotation update brings the job back here.
		return reconcile.Result{}, nil
	}
	rep := job.Status.Report
	if rep != nil && !rep.Complete && job.Status.CompletionTime != nil {
		if wait := job.Status.CompletionTime.Add(reportWait).Sub(r.clock.Now()); wait > 0 {
			// The pods' logs are the report's only source: keep them until
			// the collector has read them. Its status patch brings the job
			// back; the requeue bounds the wait should it never come.
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.deletePods(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	for _, name := range []string{job.Name, jobdata.NodesName(job.Name)} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: name}}
		if err := r.client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	if rep != nil && rep.DeleteAfter != nil {
		if wait := rep.DeleteAfter.Sub(r.clock.Now()); wait > 0 {
			// The job and its report outlive the pods (keepReportFor);
			// nothing else brings the job back when that time comes.
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.deleteReport(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(job.UID)})
	r.forget(job.Name)
	return reconcile.Result{}, client.IgnoreNotFound(err)
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
	shards, err := nodereport.Shards(ctx, r.apiReader, r.opts.Namespace, job)
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

// progress tallies a job's nodes.
type progress struct {
	eligible, started, active, succeeded, failed int
	results                                      eraserv1.ImageResults
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

func truncate(s string) string {
	if len(s) > 1000 {
		return s[:997] + "..."
	}
	return s
}
