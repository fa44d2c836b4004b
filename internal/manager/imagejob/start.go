// The start phase: a new job's eligible nodes are chosen and recorded once.

package imagejob

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
)

// start fixes the job's nodes, marks it Running and starts the first wave.
// Its steps, by the names their errors carry: data (the job's ConfigMap),
// nodes (chosen once and recorded), status (Running), then the first pass
// (run).
func (r *Reconciler) start(ctx context.Context, job *eraserv1.ImageJob) (reconcile.Result, error) {
	data, err := r.data(ctx, job)
	if apierrors.IsNotFound(err) {
		if r.waitedFor(job) < time.Minute {
			// The owner creates the job first and its ConfigMap right after;
			// the ConfigMap's arrival brings the job back (Owns). The requeue
			// only covers a lost event.
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
		return reconcile.Result{}, r.fail(ctx, job, eraserv1.ReasonConfigMissing, "the job's ConfigMap "+job.Name+" does not exist")
	}
	if errors.Is(err, jobdata.ErrInvalid) {
		return reconcile.Result{}, r.fail(ctx, job, eraserv1.ReasonInvalidJobData, err.Error())
	}
	if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("data", err)
	}

	nodes, err := r.nodes(ctx, job)
	if apierrors.IsNotFound(err) {
		var list corev1.NodeList
		if err := r.client.List(ctx, &list); err != nil {
			return reconcile.Result{}, reconcilestep.Wrap("nodes", err)
		}
		targets, skipped, err := nodefilter.Select(list.Items, nodefilter.RulesFor(data.Kind == podspec.KindCollector, data.Config))
		if err != nil {
			return reconcile.Result{}, r.fail(ctx, job, eraserv1.ReasonInvalidNodeFilter, err.Error())
		}
		nodes = confine(jobdata.Nodes{Targets: targets, Skipped: skipped}, data.Nodes)
		if err := jobdata.CreateNodes(ctx, r.client, r.opts.Namespace, job, nodes); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, reconcilestep.Wrap("nodes", err)
		}
	} else if err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("nodes", err)
	}

	now := metav1.NewTime(r.clock.Now())
	job.Status.Phase = eraserv1.PhaseRunning
	job.Status.Desired = len(nodes.Targets) + len(nodes.Skipped)
	job.Status.Skipped = len(nodes.Skipped)
	job.Status.StartTime = &now
	job.Status.ObservedGeneration = job.Generation
	setRunning(job, len(nodes.Targets), nodes.Skipped)
	if err := r.client.Status().Update(ctx, job); err != nil {
		return reconcile.Result{}, reconcilestep.Wrap("status", err)
	}
	r.recorder.Eventf(job, corev1.EventTypeNormal, eraserv1.ReasonStarted, "running on %d nodes (%d skipped)", len(nodes.Targets), len(nodes.Skipped))
	// Straight on to the first wave, rather than waiting for the status
	// update to come back as an event.
	res, err := r.run(ctx, job)
	return res, reconcilestep.Wrap("run", err)
}

// waitedFor is how long this process has known the job, on its own clock
// (wave/sight.go): a restarted manager waits for the data a minute again.
func (r *Reconciler) waitedFor(job *eraserv1.ImageJob) time.Duration {
	return r.clock.Since(r.firstSeen(job, func(st *jobState) *time.Time { return &st.seen }))
}

// firstSeen is the time in the job's memory that at returns, set to now on
// first use: when this process first saw the job in some state.
func (r *Reconciler) firstSeen(job *eraserv1.ImageJob, at func(*jobState) *time.Time) time.Time {
	st := r.state(job)
	st.mu.Lock()
	defer st.mu.Unlock()
	t := at(st)
	if t.IsZero() {
		*t = r.clock.Now()
	}
	return *t
}

// confine keeps of the nodes those the job is confined to (a catch-up run's),
// in their order; nil confines to none. It is pure.
func confine(n jobdata.Nodes, only []string) jobdata.Nodes {
	if only == nil {
		return n
	}
	keep := make(map[string]bool, len(only))
	for _, name := range only {
		keep[name] = true
	}
	out := jobdata.Nodes{Targets: []nodefilter.Target{}, Skipped: []nodefilter.Skipped{}}
	for _, t := range n.Targets {
		if keep[t.Name] {
			out.Targets = append(out.Targets, t)
		}
	}
	for _, s := range n.Skipped {
		if keep[s.Name] {
			out.Skipped = append(out.Skipped, s)
		}
	}
	return out
}
