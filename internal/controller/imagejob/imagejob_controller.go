// Package imagejob runs an ImageJob: it picks the eligible nodes, creates one
// worker pod per node (in waves when configured), fails pods that do not
// start or finish in time, reads each remover's results, decides the job's
// outcome by the success ratio, and cleans up after the configured delay.
package imagejob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/metrics"
	"github.com/eraser-oss/eraser/internal/nodefilter"
	"github.com/eraser-oss/eraser/internal/podspec"
)

// Options are the reconciler's settings that do not change at run time.
type Options struct {
	// Namespace holds worker pods and job ConfigMaps.
	Namespace string
	// LogLevel is passed to the workers.
	LogLevel string
}

// Reconciler runs ImageJobs.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  record.EventRecorder
	clock     clock.Clock
	metrics   *metrics.Recorder
	opts      Options
	// created remembers pods this process created that the cache has not
	// shown yet, so they are not mistaken for pods that went missing.
	created sync.Map // pod name -> time created
	// lastPass is when each running job was last examined.
	lastPass sync.Map // job name -> time
}

// passInterval is the least time between two passes over a running job.
const passInterval = 500 * time.Millisecond

// throttle returns how long to wait before the job's next pass, or 0 and
// records the pass.
func (r *Reconciler) throttle(job string) time.Duration {
	now := r.clock.Now()
	if v, ok := r.lastPass.Load(job); ok {
		if wait := v.(time.Time).Add(passInterval).Sub(now); wait > 0 {
			return wait
		}
	}
	r.lastPass.Store(job, now)
	return 0
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// NewReconciler builds the reconciler with its dependencies.
func NewReconciler(c client.Client, apiReader client.Reader, recorder record.EventRecorder, clk clock.Clock, m *metrics.Recorder, opts Options) *Reconciler {
	return &Reconciler{client: c, apiReader: apiReader, recorder: recorder, clock: clk, metrics: m, opts: opts}
}

// SetupWithManager watches jobs, their pods, and node deletions (a deleted
// node's pod may never report again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("imagejob").
		For(&eraserv1.ImageJob{}).
		Owns(&corev1.Pod{}).
		// The job's ConfigMap is created right after the job: its arrival
		// starts the job without waiting for a requeue.
		Owns(&corev1.ConfigMap{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.runningJobs),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Complete(r)
}

func (r *Reconciler) runningJobs(ctx context.Context, _ client.Object) []reconcile.Request {
	var jobs eraserv1.ImageJobList
	if err := r.client.List(ctx, &jobs); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, j := range jobs.Items {
		if j.Status.Phase == eraserv1.PhaseRunning {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: j.Name}})
		}
	}
	return out
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
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !job.DeletionTimestamp.IsZero() {
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

// run creates pods as waves allow, judges finished ones and finishes the job.
func (r *Reconciler) run(ctx context.Context, job *eraserv1.ImageJob) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	// Data that is gone or unusable ends the job; anything else (the API
	// server busy, say) is retried.
	data, err := r.data(ctx, job.Name)
	if apierrors.IsNotFound(err) || errors.Is(err, jobdata.ErrInvalid) {
		return reconcile.Result{}, r.fail(ctx, job, "ConfigMissing", "reading the job's ConfigMap: "+err.Error())
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	nodes, err := r.nodes(ctx, job.Name)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.fail(ctx, job, "NodesMissing", "reading the job's node list: "+err.Error())
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	// A pass reads every pod of the job; on thousands of nodes, pod events
	// would run it back to back. One pass per interval sees them all.
	if wait := r.throttle(job.Name); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	var pods corev1.PodList
	// Read-only use: no copies of thousands of cached pods per pass.
	if err := r.client.List(ctx, &pods, client.InNamespace(r.opts.Namespace), client.MatchingLabels{podspec.LabelJob: job.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	byNode := map[string]*corev1.Pod{}
	for i := range pods.Items {
		byNode[pods.Items[i].Spec.NodeName] = &pods.Items[i]
	}

	cfg := data.Config
	t := timeouts{start: cfg.Manager.ImageJob.PodStartTimeout, run: cfg.Manager.ImageJob.PodRunTimeout}
	now := r.clock.Now()
	p := progress{eligible: len(nodes.Targets), started: job.Status.Started}
	// Pods created before a crash that the status does not count yet. Only
	// an unbroken run: a node after a gap is created (AlreadyExists) when
	// the wave reaches it.
	for p.started < p.eligible && byNode[nodes.Targets[p.started].Name] != nil {
		p.started++
	}
	failed := map[string]eraserv1.NodeFailure{}
	for _, f := range job.Status.FailedNodes {
		failed[f.Node] = f
	}
	var toDelete []*corev1.Pod
	var next time.Time
	perNode := map[string]metrics.NodeCounts{}
	for _, target := range nodes.Targets[:p.started] {
		pod := byNode[target.Name]
		if pod == nil {
			name := podspec.PodName(job.Name, target.Name)
			if r.expected(name) {
				p.active++
				continue
			}
			if _, recorded := failed[target.Name]; !recorded {
				// Not in the cache: confirm with the API server before
				// counting the node as lost.
				err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, &corev1.Pod{})
				if err == nil {
					p.active++
					continue
				}
				if !apierrors.IsNotFound(err) {
					return reconcile.Result{}, err
				}
				failed[target.Name] = eraserv1.NodeFailure{Node: target.Name, Reason: ReasonPodMissing, Message: "the pod disappeared before it finished"}
			}
			p.failed++
			continue
		}
		r.created.Delete(pod.Name)
		o := classify(pod, now, t, r.nodeExists(ctx, target.Name))
		switch o.state {
		case stateSucceeded:
			p.succeeded++
		case stateFailed:
			p.failed++
			if _, recorded := failed[target.Name]; !recorded {
				failed[target.Name] = eraserv1.NodeFailure{Node: target.Name, Reason: o.reason, Message: truncate(o.message)}
				r.recorder.Eventf(job, corev1.EventTypeWarning, "NodeFailed", "node %s: %s: %s", target.Name, o.reason, truncate(o.message))
			}
			if o.timedOut {
				toDelete = append(toDelete, pod)
			}
		default:
			p.active++
			if d := deadline(pod, t); !d.IsZero() && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
		addResults(&p.results, o.summary)
		if n := o.counts(); n != (metrics.NodeCounts{}) {
			perNode[target.Name] = n
		}
	}

	// Start the next wave.
	limit := cfg.Manager.ImageJob.MaxConcurrentNodes.Of(p.eligible)
	if limit == 0 {
		limit = p.eligible
	}
	var wave []nodefilter.Target
	for p.started < p.eligible && p.active < limit {
		target := nodes.Targets[p.started]
		p.started++
		if !r.nodeExists(ctx, target.Name) {
			failed[target.Name] = eraserv1.NodeFailure{Node: target.Name, Reason: ReasonNodeDeleted, Message: "the node was deleted before its pod was created"}
			p.failed++
			continue
		}
		wave = append(wave, target)
		p.active++
	}
	build := func(target nodefilter.Target) (*corev1.Pod, error) {
		return podspec.Build(podspec.Params{
			Job: job.Name, JobUID: job.UID, Kind: data.Kind, Node: target.Name, OS: target.OS,
			Namespace: r.opts.Namespace, Config: cfg, ConfigMap: job.Name, ConfigKey: jobdata.ConfigKey,
			Exclusions: data.Exclusions, LogLevel: r.opts.LogLevel, DryRun: data.DryRun,
		})
	}
	if len(wave) > 0 {
		// Checked once here, so that a bad configuration fails the job
		// rather than every node.
		if _, err := build(wave[0]); err != nil {
			return reconcile.Result{}, r.fail(ctx, job, "InvalidPodSpec", err.Error())
		}
	}
	ok, createErr := r.createPods(ctx, wave, build, now)
	if createErr != nil {
		// Pods not created are retried on the next pass (creation is
		// idempotent: pod names are deterministic), so the cursor goes back
		// to the first of them.
		for i, target := range wave {
			if !ok[i] {
				p.started = slices.IndexFunc(nodes.Targets, func(t nodefilter.Target) bool { return t.Name == target.Name })
				break
			}
		}
	}
	if len(wave) > 0 && t.start > 0 {
		if d := now.Add(t.start); next.IsZero() || d.Before(next) {
			next = d
		}
	}

	job.Status.Started = p.started
	job.Status.Succeeded = p.succeeded
	job.Status.Failed = p.failed
	job.Status.Results = &p.results
	job.Status.FailedNodes = boundedFailures(failed)
	finished := p.started == p.eligible && p.active == 0
	if finished {
		r.finish(job, p, cfg)
	} else {
		setRunning(job, p.eligible, nodes.Skipped)
	}
	job.Status.ObservedGeneration = job.Generation
	if err := r.client.Status().Update(ctx, job); err != nil {
		return reconcile.Result{}, err
	}
	// Deleted only now that their failure is on record.
	for _, pod := range toDelete {
		if err := r.client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			logger.Error(err, "deleting a timed-out pod", "pod", pod.Name)
		}
	}
	if finished {
		r.announce(job, perNode)
		return reconcile.Result{}, nil
	}
	if createErr != nil {
		return reconcile.Result{}, createErr
	}
	// Pod events drive progress; only a timeout needs a wake-up of its own.
	if !next.IsZero() {
		return reconcile.Result{RequeueAfter: max(next.Sub(now), time.Second)}, nil
	}
	return reconcile.Result{}, nil
}

// createWorkers bounds the pod creations in flight: enough to fan out
// thousands of nodes in seconds without flooding the API server.
const createWorkers = 32

// createPods builds and creates a wave's pods in parallel (built one at a
// time, so a 5,000-node wave is never in memory at once) and says which
// exist now; an existing pod (from before a restart) counts as created.
func (r *Reconciler) createPods(ctx context.Context, wave []nodefilter.Target, build func(nodefilter.Target) (*corev1.Pod, error), now time.Time) ([]bool, error) {
	var mu sync.Mutex
	var firstErr error
	ok := make([]bool, len(wave))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(createWorkers, len(wave)) {
		wg.Go(func() {
			for i := range work {
				pod, err := build(wave[i])
				if err == nil {
					err = r.client.Create(ctx, pod)
				}
				if err == nil || apierrors.IsAlreadyExists(err) {
					r.created.Store(pod.Name, now)
					ok[i] = true
					continue
				}
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("creating the pod for node %s: %w", wave[i].Name, err)
				}
				mu.Unlock()
			}
		})
	}
	for i := range wave {
		work <- i
	}
	close(work)
	wg.Wait()
	return ok, firstErr
}

// expected reports a pod created by this process that the cache has not
// shown yet; the memory is dropped after a minute, by when it must show.
func (r *Reconciler) expected(name string) bool {
	v, ok := r.created.Load(name)
	if !ok {
		return false
	}
	if r.clock.Since(v.(time.Time)) > time.Minute {
		r.created.Delete(name)
		return false
	}
	return true
}

func (r *Reconciler) nodeExists(ctx context.Context, name string) bool {
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
	return !apierrors.IsNotFound(err)
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
	setFinished(job, p, ratio, cfg.Manager.ImageJob.SuccessRatio)
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
	if err := r.client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(r.opts.Namespace), client.MatchingLabels{podspec.LabelJob: job.Name}); err != nil {
		return reconcile.Result{}, err
	}
	for _, name := range []string{job.Name, jobdata.NodesName(job.Name)} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: name}}
		if err := r.client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: ptr.To(job.UID)})
	r.lastPass.Delete(job.Name)
	return reconcile.Result{}, client.IgnoreNotFound(err)
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
