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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
	"github.com/eraser-oss/eraser/internal/util/textcut"
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
			return reconcile.Result{}, reconcilestep.Wrap("load", err)
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
// by the names their errors carry:
//   - gather: the job's pods and nodes, from the cache (and the API server
//     for a pod nothing explains);
//   - replace: the pods the nodes' kubelets refused at admission deleted,
//     so that their nodes get a new pod after the creation backoff;
//   - observe and plan, pure (package wave): each node judged, the next
//     wave chosen;
//   - admit: the wave takes its nodes in the queue;
//   - prepare: the exclusion lists, the references, the pod-build check;
//   - create: the wave's pods;
//   - status: the figures and the run's end (wave.Ended), written once.
//
// A step that fails after admit releases the wave's claims: no pod of it
// exists, and neither another run waiting for those nodes nor the bound on
// pods in flight may count it.
func (r *Reconciler) pass(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, nodes jobdata.Nodes, st *jobState) (reconcile.Result, error) {
	w, err := r.gather(ctx, job, data.Config, data.Kind == podspec.KindCollector, nodes, st)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("gather", err)
	}
	if err := r.replace(ctx, st); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("replace", err)
	}
	held, err := pause.Read(ctx, r.client, r.opts.Namespace)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("gather", err)
	}
	w.Paused = held.Paused
	o := wave.Observe(w)
	budget := data.Config.Manager.ImageJob.MaxFailedNodes
	w.Halted = wave.OverBudget(o.Failed, budget, o.Eligible)
	p, err := r.admit(job, data, w, o, budget)
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("admit", err)
	}
	build, failed, err := r.prepare(ctx, job, data, st, w, p)
	if err != nil || failed {
		r.queue.Release(job.Name, nodeNames(w.Targets, p.Create)...)
		return reconcile.Result{}, reconcilestep.Wrap("prepare", err)
	}
	errs := r.createPods(ctx, w.Targets, p.Create, build)
	for k, i := range p.Create {
		if errs[k] != nil {
			r.queue.Release(job.Name, w.Targets[i].Name)
		}
	}
	if msg, all := refusedAll(errs); all && len(w.Pods) == 0 && len(st.created) == 0 {
		// Not one worker pod of this job exists and the API server refused
		// every one it was sent: retrying node by node only delays the news.
		job.Status.Failed = len(w.Targets)
		return reconcile.Result{}, reconcilestep.Wrap("create", r.fail(ctx, job, eraserv1.ReasonPodsRefused, "the API server refused the worker pods: "+msg))
	}
	r.recordCreates(job, st, w, p, errs)
	changed := len(p.Create) > 0 || len(p.Failed) > 0 || p.Started != o.Started || len(p.Waiting) != o.Waiting
	w = wave.Advance(w, p, errs)
	if changed {
		// Judged again with the wave in place: one set of rules counts
		// every node, whether it was reached by this wave or an earlier one.
		o = wave.Observe(w)
	}
	maps.Copy(st.failures, w.Failures)
	maps.Copy(st.failures, o.NewFailures)
	before := job.Status.DeepCopy()
	halted := wave.OverBudget(o.Failed, budget, o.Eligible)
	recordWaiting(job, w, p.Waiting)
	finished := r.compose(job, data.Config, nodes, o.Progress, st.failures, halted)
	if !finished && !halted && held.Paused {
		setCondition(job, metav1.ConditionUnknown, eraserv1.ReasonPaused, held.Message(fmt.Sprintf("%d of %d nodes done, %d running; the rest",
			job.Status.Succeeded+job.Status.Failed, o.Eligible, o.Active)))
	}
	if finished {
		r.queue.Leave(job.Name)
	}
	// A pass that changed nothing writes nothing: on a long run most passes
	// only wait for pods.
	if finished || !apiequality.Semantic.DeepEqual(before, &job.Status) {
		if err := r.client.Status().Update(ctx, job); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("status", err)
		}
	}
	r.afterUpdate(ctx, job, st, o.TimedOut)
	if halted {
		r.announceOverrun(job, st, o.Progress, budget)
	}
	if finished {
		r.announce(job, o.PerNode)
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: wave.WakeUp(w, o, p)}, nil
}

// prepare readies the admitted wave: the exclusion lists and references
// its pods mount, and its pod builder, checked once. failed is whether the
// job has failed (its configuration cannot build a pod): the error then is
// only the failure's own status write.
func (r *Reconciler) prepare(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, st *jobState, w wave.Snapshot, p wave.Wave) (podBuilder, bool, error) {
	if len(p.Create) == 0 {
		return r.builder(job, data, waveRefs{}, st.db), false, nil
	}
	// Exclusion lists are read as each wave is created, not when the job
	// was: a list added during a long rolling job protects the nodes not
	// reached yet, and one deleted is not mounted (its pods would never
	// start).
	var err error
	if data.Exclusions, err = jobdata.ExclusionLists(ctx, r.client, r.opts.Namespace); err != nil {
		return nil, false, fmt.Errorf("reading the exclusion lists: %w", err)
	}
	r.warnExclusions(ctx, job, st)
	refs, err := r.waveReferences(ctx, job, data, st)
	if errors.Is(err, errNotSynced) {
		// Bounded like a pod's start: an index that never syncs (the
		// manager may not list some kind cluster-wide) must end the run,
		// not keep it Running with no pods.
		if st.seen.IsZero() {
			st.seen = r.clock.Now()
		}
		if bound := data.Config.Manager.ImageJob.PodStartTimeout; r.clock.Since(st.seen) > bound {
			return nil, true, r.fail(ctx, job, eraserv1.ReasonReferencesNotSynced, fmt.Sprintf(
				"the reference index did not sync within podStartTimeout %v of the run's start: check the manager's log for the list or watch that fails (RBAC to list and watch pods and workloads cluster-wide)", bound))
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("writing the wave's references: %w", err)
	}
	if err := r.scanDB(job, data, st); err != nil {
		return nil, false, err
	}
	build := r.builder(job, data, refs, st.db)
	// Checked once here, so that a bad configuration fails the job rather
	// than every node.
	if _, err := build(p.Create[0], w.Targets[p.Create[0]]); err != nil {
		return nil, true, r.fail(ctx, job, eraserv1.ReasonInvalidPodSpec, err.Error())
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
func (r *Reconciler) gather(ctx context.Context, job *eraserv1.ImageJob, cfg *config.Config, scheduled bool, nodes jobdata.Nodes, st *jobState) (wave.Snapshot, error) {
	now := r.clock.Now()
	w := wave.Snapshot{
		Targets: nodes.Targets, Started: min(job.Status.Started, len(nodes.Targets)),
		Pods: map[string]*corev1.Pod{}, Pending: map[string]bool{}, Missing: map[string]bool{}, Nodes: map[string]bool{},
		Finished: make(map[string]wave.Outcome, len(st.finished)),
		Failures: st.failures, Creating: st.creating, PodsSeen: st.podsSeen, Now: now,
		// A scanning run's pods may outlive podRunTimeout: config.Waits.
		Timeouts: wave.Timeouts{Start: cfg.Manager.ImageJob.PodStartTimeout, Run: cfg.Waits(scheduled).PodRun, Wait: cfg.Manager.ImageJob.NodeWaitTimeout},
		Limit:    cfg.Manager.ImageJob.MaxConcurrentNodes.Of(len(nodes.Targets)),
		Waiting:  map[string]bool{},
	}
	w.Stall = r.stallOf(job, st, now)
	for _, i := range jobdata.ParseIndexes(job.Status.WaitingIndexes, w.Started) {
		w.Waiting[nodes.Targets[i].Name] = true
	}
	// Read in place: the cache's own pods, never modified here.
	pods, err := r.cached.JobPods(job.Name)
	if err != nil {
		return w, fmt.Errorf("reading job %s's pods from the cache: %w", job.Name, err)
	}
	var shown []string
	defer func() { r.queue.Release(job.Name, shown...) }()
	for _, pod := range pods {
		// A pod labelled with this job's name that another job of that
		// name controls is a leftover of an earlier run, deleted by the
		// garbage collector: never counted as this run's.
		if pod.Namespace != r.opts.Namespace || !jobdata.SameRun(pod, job.UID) {
			continue
		}
		node := pod.Spec.NodeName
		w.Pods[node] = pod
		createdAt, claimed := st.created[node]
		if claimed {
			// The cache shows it: the cache holds the node from now on.
			shown = append(shown, node)
		}
		delete(st.created, node)
		if msg, refused := podspec.NotAdmitted(pod); refused {
			if _, failed := st.failures[node]; !failed {
				// Never admitted, it ran nothing: replaced like a pod the
				// API server refused, the node waiting for its next pod.
				r.unadmitted(ctx, job, st, pod, msg, now)
				delete(w.Pods, node)
				w.Waiting[node] = true
				continue
			}
		}
		if cf, ok := st.creating[node]; ok && cf.Admission && pod.Status.Phase != corev1.PodPending {
			// Admitted at last: the node's refusals are over.
			delete(st.creating, node)
		}
		if podspec.Finished(pod) {
			// A finished pod's outcome depends on the pod alone: judged
			// (and its termination messages decoded) once per version.
			m, ok := st.finished[node]
			if !ok || m.version != pod.ResourceVersion {
				m = judged{version: pod.ResourceVersion, out: wave.Classify(pod, wave.Seen{}, now, w.Timeouts, true)}
				st.finished[node] = m
			}
			w.Finished[node] = m.out
		} else {
			st.podsSeen[node] = wave.FirstSeen(st.podsSeen[node], pod, createdAt, r.skew.get(), now)
		}
	}
	// Every node's, finished ones included: a finished pod's outcome counts
	// for the node's metrics only while the node exists (observe.outcome).
	for _, target := range w.Targets {
		ok, err := r.cached.NodeExists(target.Name)
		if err != nil {
			return w, fmt.Errorf("reading node %s from the cache: %w", target.Name, err)
		}
		if ok {
			w.Nodes[target.Name] = true
		}
	}
	for node := range st.created {
		if st.expected(node, now) {
			w.Pending[node] = true
		} else {
			shown = append(shown, node)
		}
	}
	for _, node := range wave.Unconfirmed(w) {
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: podspec.PodName(job.Name, node)}, &corev1.Pod{})
		switch {
		case err == nil:
			w.Pending[node] = true
		case apierrors.IsNotFound(err):
			w.Missing[node] = true
		default:
			return w, err
		}
	}
	return w, nil
}

// unadmitted records a pod the node's kubelet refused at admission
// (podspec.NotAdmitted), once per pod: one more attempt at the node's pod,
// with the creation backoff, and the pod to delete (replace). Each distinct
// reason is announced once.
func (r *Reconciler) unadmitted(ctx context.Context, job *eraserv1.ImageJob, st *jobState, pod *corev1.Pod, msg string, now time.Time) {
	node := pod.Spec.NodeName
	st.unadmittedPods = append(st.unadmittedPods, pod)
	if st.unadmitted[node] == pod.UID {
		return
	}
	st.unadmitted[node] = pod.UID
	prev, had := st.creating[node]
	st.creating[node] = wave.Unadmitted(prev, had, now, msg)
	delete(st.podsSeen, node)
	delete(st.finished, node)
	log.FromContext(ctx).Info("the node's kubelet refused the worker pod at admission: recreating it", "node", node, "reason", msg, "attempts", st.creating[node].Attempts)
	key := "admission: " + pod.Status.Reason
	if !st.refusals[key] && len(st.refusals) < maxRefusalEvents {
		st.refusals[key] = true
		r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonNotAdmitted,
			"the kubelet of node %s refused a worker pod at admission: %s (the pod is recreated with backoff; a node fails once none is admitted within the start timeout)", node, textcut.Cut(msg, wave.MaxMessage))
	}
}

// replace deletes the pods the nodes' kubelets refused at admission that
// gather found. A Failed pod is deleted at once, so that the node's next
// pod, after at least the first backoff, is not answered AlreadyExists.
func (r *Reconciler) replace(ctx context.Context, st *jobState) error {
	pods := st.unadmittedPods
	st.unadmittedPods = nil
	for _, pod := range pods {
		if err := r.client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s, which its node's kubelet refused: %w", pod.Name, err)
		}
	}
	return nil
}

// stallOf builds the pass's stallFunc over the cache; st remembers when a
// node whose Ready condition carries no time was first seen not Ready.
func (r *Reconciler) stallOf(job *eraserv1.ImageJob, st *jobState, now time.Time) wave.StallFunc {
	return func(name string) (wave.Stall, bool) {
		node, err := r.cached.Node(name)
		if err != nil || node == nil {
			// Not synced, or gone: a deleted node fails on its own.
			return wave.Stall{}, false
		}
		if wave.NodeReady(node) {
			delete(st.notReady, name)
		} else if _, ok := st.notReady[name]; !ok {
			st.notReady[name] = now
		}
		busy, err := r.cached.BusyOn(name)
		if err != nil {
			return wave.Stall{}, false
		}
		ours := func(pod *corev1.Pod) bool {
			return pod.Labels[podspec.LabelJob] == job.Name && jobdata.SameRun(pod, job.UID)
		}
		return wave.Stalled(node, busy, ours, st.notReady[name])
	}
}

// recordCreates remembers the wave's created pods and its refusals (with
// their backoff), logging each refusal and announcing each distinct one.
func (r *Reconciler) recordCreates(job *eraserv1.ImageJob, st *jobState, w wave.Snapshot, p wave.Wave, errs []error) {
	// Read once every creation has returned, so that no pod's start timeout
	// counts from before it existed.
	created := r.clock.Now()
	for k, i := range p.Create {
		node := w.Targets[i].Name
		if errs[k] == nil {
			st.created[node] = created
			// A kubelet's refusal comes after the pod is created: its
			// record, and the bound counted from the first, stay until a
			// pod of the node is admitted or the node fails.
			if !st.creating[node].Admission {
				delete(st.creating, node)
			}
			continue
		}
		prev, had := st.creating[node]
		st.creating[node] = wave.Refused(prev, had, w.Now, errs[k].Error())
		msg := apiMessage(errs[k])
		if !st.refusals[msg] && len(st.refusals) < maxRefusalEvents {
			st.refusals[msg] = true
			r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonCreateFailed,
				"creating worker pods: %s (retried with backoff; a node fails once its pod is not created within the start timeout)", textcut.Cut(msg, wave.MaxMessage))
		}
	}
}

// compose writes the pass's figures into the job's status and says whether
// the job has finished.
// A run over its failure budget (halted) ends once its running pods have.
func (r *Reconciler) compose(job *eraserv1.ImageJob, cfg *config.Config, nodes jobdata.Nodes, p wave.Progress, failures map[string]eraserv1.NodeFailure, halted bool) bool {
	job.Status.Started = p.Started
	job.Status.Succeeded = p.Succeeded
	job.Status.Failed = p.Failed
	p.Results.Freed = p.Freed()
	job.Status.Results = &p.Results
	job.Status.FailedNodes = boundedFailures(failures)
	job.Status.FailedIndexes = encodeFailures(nodes.Targets, failures)
	job.Status.ObservedGeneration = job.Generation
	finished := wave.Ended(p, halted)
	budget := cfg.Manager.ImageJob.MaxFailedNodes
	switch {
	case finished && halted:
		// The nodes never reached are untouched: neither succeeded nor
		// failed, they count with those the filter left out.
		job.Status.Skipped = len(nodes.Skipped) + wave.NotStarted(p)
		r.finish(job, p, cfg, true)
		setOverrun(job, p, budget)
	case finished:
		r.finish(job, p, cfg, false)
	case halted:
		setDraining(job, p, budget)
	default:
		setRunning(job, p.Eligible, nodes.Skipped)
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
		r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonNodeFailed, "%d node(s) failed: %s", len(fresh), text)
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
	return textcut.Cut(text, wave.MaxMessage)
}

// admit plans the job's next wave inside the queue's take, so that two
// jobs' passes never both take one node, and the queue records the plan.
func (r *Reconciler) admit(job *eraserv1.ImageJob, data *jobdata.Data, w wave.Snapshot, o wave.Observation, budget *config.MaxConcurrent) (wave.Wave, error) {
	var p wave.Wave
	err := r.queue.Take(job.Name, job.UID, rankOf(job, data.Kind), data.Config.Manager.ImageJob.MaxWorkerPods, func(s nodequeue.Offer) nodequeue.Choice {
		w.Headroom, w.Bounded, w.HeldBy = s.Headroom, s.Bounded, s.HeldBy
		p = wave.Next(w, o, budget)
		return nodequeue.Choice{Create: nodeNames(w.Targets, p.Create), Waiting: slices.Collect(maps.Keys(p.Waiting)), AtBound: p.AtBound}
	})
	return p, err
}

// recordWaiting writes the reached nodes that wait into the status, and the
// run the first of them waits for.
func recordWaiting(job *eraserv1.ImageJob, w wave.Snapshot, holders map[string]string) {
	var idx []int
	behind := ""
	for i, target := range w.Targets[:w.Started] {
		if !wave.Waits(w, target.Name) {
			continue
		}
		idx = append(idx, i)
		if behind == "" {
			behind = holders[target.Name]
		}
	}
	job.Status.Waiting = len(idx)
	job.Status.WaitingIndexes = jobdata.FormatIndexes(idx)
	job.Status.QueuedBehind = behind
}
