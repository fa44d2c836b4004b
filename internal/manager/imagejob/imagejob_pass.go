// The pass phase: each pass over a running job observes its pods, creates the
// next wave's and fails the late, and writes the status when it changed.

package imagejob

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

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

// pass is one pass over a running job, with its memory locked. Its steps,
// in order: gather, admit (the wave takes its nodes in the queue), prepare
// the wave (exclusion lists, references, the pod-build check), create the
// pods, write the status. A step that fails after admit releases the
// wave's claims: no pod of it exists, and neither another run waiting for
// those nodes nor the bound on pods in flight may count it.
func (r *Reconciler) pass(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, nodes jobdata.Nodes, st *jobState) (reconcile.Result, error) {
	w, err := r.gather(ctx, job, data.Config, data.Kind == podspec.KindCollector, nodes, st)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("gathering the job's pods and nodes: %w", err)
	}
	o := observe(w)
	budget := data.Config.Manager.ImageJob.MaxFailedNodes
	w.halted = overBudget(o.failed, budget, o.eligible)
	p, err := r.admit(job, data, w, o, budget)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("admitting the next wave: %w", err)
	}
	build, failed, err := r.prepare(ctx, job, data, st, w, p)
	if err != nil || failed {
		r.queue.release(job.Name, nodeNames(w.targets, p.create)...)
		return reconcile.Result{}, err
	}
	errs := r.createPods(ctx, w.targets, p.create, build)
	for k, i := range p.create {
		if errs[k] != nil {
			r.queue.release(job.Name, w.targets[i].Name)
		}
	}
	if msg, all := refusedAll(errs); all && len(w.pods) == 0 && len(st.created) == 0 {
		// Not one worker pod of this job exists and the API server refused
		// every one it was sent: retrying node by node only delays the news.
		job.Status.Failed = len(w.targets)
		return reconcile.Result{}, r.fail(ctx, job, ReasonPodsRefused, "the API server refused the worker pods: "+msg)
	}
	r.recordCreates(job, st, w, p, errs)
	changed := len(p.create) > 0 || len(p.failed) > 0 || p.started != o.started || len(p.waiting) != o.waiting
	w = advance(w, p, errs)
	if changed {
		// Judged again with the wave in place: one set of rules counts
		// every node, whether it was reached by this wave or an earlier one.
		o = observe(w)
	}
	maps.Copy(st.failures, w.failures)
	maps.Copy(st.failures, o.newFailures)
	before := job.Status.DeepCopy()
	halted := overBudget(o.failed, budget, o.eligible)
	recordWaiting(job, w, p.waiting)
	finished := r.compose(job, data.Config, nodes, o.progress, st.failures, halted)
	if finished {
		r.queue.leave(job.Name)
	}
	// A pass that changed nothing writes nothing: on a long run most passes
	// only wait for pods.
	if finished || !apiequality.Semantic.DeepEqual(before, &job.Status) {
		if err := r.client.Status().Update(ctx, job); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the job's status: %w", err)
		}
	}
	r.afterUpdate(ctx, job, st, o.timedOut)
	if halted {
		r.announceOverrun(job, st, o.progress, budget)
	}
	if finished {
		r.announce(job, o.perNode)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: wakeUp(w, o, p, st)}, nil
}

// prepare readies the admitted wave: the exclusion lists and references
// its pods mount, and its pod builder, checked once. failed is whether the
// job has failed (its configuration cannot build a pod): the error then is
// only the failure's own status write.
func (r *Reconciler) prepare(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, st *jobState, w world, p wave) (podBuilder, bool, error) {
	if len(p.create) == 0 {
		return r.builder(job, data, waveRefs{}), false, nil
	}
	// Exclusion lists are read as each wave is created, not when the job
	// was: a list added during a long rolling job protects the nodes not
	// reached yet, and one deleted is not mounted (its pods would never
	// start).
	var err error
	if data.Exclusions, err = jobdata.ExclusionLists(ctx, r.client, r.opts.Namespace); err != nil {
		return nil, false, fmt.Errorf("reading the exclusion lists: %w", err)
	}
	refs, err := r.waveReferences(ctx, job, data, st)
	if errors.Is(err, errNotSynced) {
		// Bounded like a pod's start: an index that never syncs (the
		// manager may not list some kind cluster-wide) must end the run,
		// not keep it Running with no pods.
		if st.seen.IsZero() {
			st.seen = r.clock.Now()
		}
		if bound := data.Config.Manager.ImageJob.PodStartTimeout; r.clock.Since(st.seen) > bound {
			return nil, true, r.fail(ctx, job, ReasonReferencesNotSynced, fmt.Sprintf(
				"the reference index did not sync within podStartTimeout %v of the run's start: check the manager's log for the list or watch that fails (RBAC to list and watch pods and workloads cluster-wide)", bound))
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("writing the wave's references: %w", err)
	}
	build := r.builder(job, data, refs)
	// Checked once here, so that a bad configuration fails the job rather
	// than every node.
	if _, err := build(p.create[0], w.targets[p.create[0]]); err != nil {
		return nil, true, r.fail(ctx, job, "InvalidPodSpec", err.Error())
	}
	return build, false, nil
}

// podBuilder builds a node's worker pod (the wave's builder).
type podBuilder = func(int, nodefilter.Target) (*corev1.Pod, error)

// nodeNames names the targets at the indexes.
func nodeNames(targets []nodefilter.Target, idx []int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, targets[i].Name)
	}
	return out
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
		failures: st.failures, creating: st.creating, sights: st.sights, now: now,
		// A scanning run's pods may outlive podRunTimeout: config.Waits.
		timeouts: timeouts{start: cfg.Manager.ImageJob.PodStartTimeout, run: cfg.Waits(scheduled).PodRun, wait: cfg.Manager.ImageJob.NodeWaitTimeout},
		limit:    cfg.Manager.ImageJob.MaxConcurrentNodes.Of(len(nodes.Targets)),
		waiting:  map[string]bool{},
	}
	w.stall = r.stallOf(job, st, now)
	for _, i := range jobdata.ParseIndexes(job.Status.WaitingIndexes, w.started) {
		w.waiting[nodes.Targets[i].Name] = true
	}
	// Read in place: the cache's own pods, never modified here.
	pods, err := r.cached.JobPods(job.Name)
	if err != nil {
		return w, fmt.Errorf("reading job %s's pods from the cache: %w", job.Name, err)
	}
	var shown []string
	defer func() { r.queue.release(job.Name, shown...) }()
	for _, pod := range pods {
		// A pod labelled with this job's name that another job of that
		// name controls is a leftover of an earlier run, deleted by the
		// garbage collector: never counted as this run's.
		if pod.Namespace != r.opts.Namespace || !jobdata.SameRun(pod, job.UID) {
			continue
		}
		node := pod.Spec.NodeName
		w.pods[node] = pod
		createdAt, claimed := st.created[node]
		if claimed {
			// The cache shows it: the cache holds the node from now on.
			shown = append(shown, node)
		}
		delete(st.created, node)
		if podspec.Finished(pod) {
			// A finished pod's outcome depends on the pod alone: judged
			// (and its termination messages decoded) once per version.
			m, ok := st.finished[node]
			if !ok || m.version != pod.ResourceVersion {
				m = judged{version: pod.ResourceVersion, out: classify(pod, sight{}, now, w.timeouts, true)}
				st.finished[node] = m
			}
			w.finished[node] = m.out
		} else {
			st.sights[node] = sighted(st.sights[node], pod, createdAt, r.skew.get(), now)
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
		} else {
			shown = append(shown, node)
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

// stallOf builds the pass's stallFunc over the cache; st remembers when a
// node whose Ready condition carries no time was first seen not Ready.
func (r *Reconciler) stallOf(job *eraserv1.ImageJob, st *jobState, now time.Time) stallFunc {
	return func(name string) (stall, bool) {
		node, err := r.cached.Node(name)
		if err != nil || node == nil {
			// Not synced, or gone: a deleted node fails on its own.
			return stall{}, false
		}
		if nodeReady(node) {
			delete(st.notReady, name)
		} else if _, ok := st.notReady[name]; !ok {
			st.notReady[name] = now
		}
		busy, err := r.cached.BusyOn(name)
		if err != nil {
			return stall{}, false
		}
		return stalled(node, busy, job.Name, job.UID, st.notReady[name])
	}
}

// recordCreates remembers the wave's created pods and its refusals (with
// their backoff), logging each refusal and announcing each distinct one.
func (r *Reconciler) recordCreates(job *eraserv1.ImageJob, st *jobState, w world, p wave, errs []error) {
	// Read once every creation has returned, so that no pod's start timeout
	// counts from before it existed.
	created := r.clock.Now()
	for k, i := range p.create {
		node := w.targets[i].Name
		if errs[k] == nil {
			st.created[node] = created
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
// retried, and a node that waited and could not be created waits on;
// created pods are pending until the cache shows them, nodes ended without
// a pod are failures on record, and the wave's waiting nodes wait.
func advance(w world, p wave, errs []error) world {
	end := p.started
	next := w
	next.waiting = map[string]bool{}
	for node := range p.waiting {
		next.waiting[node] = true
	}
	for k, i := range p.create {
		if errs[k] == nil {
			continue
		}
		if i < p.from {
			next.waiting[w.targets[i].Name] = true
			continue
		}
		end = i
		break
	}
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
// A run over its failure budget (halted) ends once its running pods have.
func (r *Reconciler) compose(job *eraserv1.ImageJob, cfg *config.Config, nodes jobdata.Nodes, p progress, failures map[string]eraserv1.NodeFailure, halted bool) bool {
	job.Status.Started = p.started
	job.Status.Succeeded = p.succeeded
	job.Status.Failed = p.failed
	job.Status.Results = &p.results
	job.Status.FailedNodes = boundedFailures(failures)
	job.Status.FailedIndexes = encodeFailures(nodes.Targets, failures)
	job.Status.ObservedGeneration = job.Generation
	finished := (p.started == p.eligible && p.waiting == 0 || halted) && p.active == 0
	budget := cfg.Manager.ImageJob.MaxFailedNodes
	switch {
	case finished && halted:
		// The nodes never reached are untouched: neither succeeded nor
		// failed, they count with those the filter left out.
		job.Status.Skipped = len(nodes.Skipped) + p.eligible - p.started + p.waiting
		r.finish(job, p, cfg, true)
		setOverrun(job, p, budget)
	case finished:
		r.finish(job, p, cfg, false)
	case halted:
		setDraining(job, p, budget)
	default:
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
	if len(p.waiting) > 0 || p.starved {
		// A worker that ends wakes the queued jobs (podEvents); this bounds
		// the wait should its event have come before this job queued.
		earliest(w.now.Add(queueRecheck))
	}
	if len(p.create) > 0 && w.timeouts.start > 0 {
		earliest(w.now.Add(w.timeouts.start))
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(w.now), time.Second)
}

// queueRecheck is the longest a queued job waits between passes.
const queueRecheck = 10 * time.Second

// progress tallies a job's nodes.
type progress struct {
	// started counts the reached nodes, waiting included.
	eligible, started, active, succeeded, failed, waiting int
	results                                               eraserv1.ImageResults
}
