// The catch-up phase: finished runs' per-node successes are recorded, and
// the nodes the last scheduled run missed get a run of their own.

package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// catchUpOf is whether the job is a catch-up run.
func catchUpOf(job *eraserv1.ImageJob) bool {
	return job.Annotations[eraserv1.AnnotationCatchUp] == "true"
}

// recordCoverage adds the finished jobs' per-node successes to the state.
// A job whose node list is gone (deleted by hand) adds nothing.
func (r *Reconciler) recordCoverage(ctx context.Context, st *State, finished []*eraserv1.ImageJob) error {
	for _, j := range finished {
		if j.Status.Phase != eraserv1.PhaseCompleted && j.Status.Phase != eraserv1.PhaseFailed {
			continue
		}
		nodes, err := jobdata.GetNodes(ctx, r.client, r.namespace, j)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading job %s's node list: %w", j.Name, err)
		}
		names := make([]string, len(nodes.Targets))
		for i, t := range nodes.Targets {
			names[i] = t.Name
		}
		st.Coverage = st.Coverage.record(j.CreationTimestamp.Time, catchUpOf(j), succeededNodes(names, j.Status), r.clock.Now())
	}
	return nil
}

// eligible are the nodes a scheduled run would run on now: Ready, and let
// through by the node filter, selector and tolerations. exists says which
// nodes there are at all.
func (r *Reconciler) eligible(ctx context.Context, cfg *config.Config) ([]EligibleNode, func(string) bool, error) {
	var list corev1.NodeList
	if err := r.client.List(ctx, &list); err != nil {
		return nil, nil, err
	}
	all := make(map[string]bool, len(list.Items))
	created := make(map[string]time.Time, len(list.Items))
	for _, n := range list.Items {
		all[n.Name] = true
		created[n.Name] = n.CreationTimestamp.Time
	}
	targets, _, err := nodefilter.Select(list.Items, nodefilter.RulesFor(true, cfg))
	if err != nil {
		// The filter is validated with the config; a run would fail on it
		// with its reason. No catch-up meanwhile.
		return nil, func(n string) bool { return all[n] }, nil
	}
	out := make([]EligibleNode, 0, len(targets))
	for _, t := range targets {
		out = append(out, EligibleNode{Name: t.Name, Created: created[t.Name]})
	}
	return out, func(n string) bool { return all[n] }, nil
}

// observeCoverage publishes the per-node record to the metrics: each
// eligible node's last success, and the time its overdue count runs from
// (its last success, or when it joined or the record began if later).
func (r *Reconciler) observeCoverage(c Coverage, eligible []EligibleNode, every time.Duration) {
	if !c.Known() {
		return
	}
	nodes := make(map[string]metrics.NodeCoverage, len(eligible))
	for _, e := range eligible {
		cleaned := c.Cleaned[e.Name]
		from := cleaned
		for _, t := range []time.Time{e.Created, c.Since} {
			if t.After(from) {
				from = t
			}
		}
		nc := metrics.NodeCoverage{From: from.Unix()}
		if !cleaned.IsZero() {
			nc.Cleaned = cleaned.Unix()
		}
		nodes[e.Name] = nc
	}
	r.metrics.Coverage(nodes, every)
}

// catchUp starts a catch-up run on the nodes due for one, once the first
// of them has waited the configured batch for others, and says when to look
// again.
// next is the next scheduled run, which covers every node anyway.
func (r *Reconciler) catchUp(ctx context.Context, cfg *config.Config, raw []byte, cm *corev1.ConfigMap, st *State, eligible []EligibleNode, next time.Time) (reconcile.Result, error) {
	now := r.clock.Now()
	wait := next.Sub(now)
	if !cfg.Manager.Scheduling.CatchUp {
		r.pendingSince = time.Time{}
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	every := interval(cfg.Manager.Scheduling, st.LastStart)
	nodes, ripe := due(st.Coverage, eligible, now, every, cfg.Manager.Retention.MinAge)
	if ripe > 0 {
		// Nothing else wakes us when a young node comes of age.
		wait = min(wait, ripe)
	}
	batch := cfg.Manager.Scheduling.CatchUpBatch
	if len(nodes) == 0 || next.Sub(now) <= batch {
		r.pendingSince = time.Time{}
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if r.pendingSince.IsZero() {
		r.pendingSince = now
	}
	if left := batch - now.Sub(r.pendingSince); left > 0 {
		// Batching: other nodes coming back meanwhile join this run.
		return reconcile.Result{RequeueAfter: min(wait, left)}, nil
	}
	name := fmt.Sprintf("imagejob-scheduled-catchup-%d", now.Unix())
	for {
		what := fmt.Sprintf("catch-up run started for %d node(s) the last scheduled run missed: %s", len(nodes), namesText(nodes))
		err := r.createJob(ctx, name, cfg, raw, what, nodes)
		if errors.Is(err, jobdata.ErrTooLarge) && len(nodes) > 1 {
			// Too many long names for the job's data: the first half now,
			// the others, still due, in the next catch-up.
			nodes = nodes[:len(nodes)/2]
			continue
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		break
	}
	for _, n := range nodes {
		st.Coverage.Tried[n] = now
	}
	r.pendingSince = time.Time{}
	// The job's creation wakes us; it is then a run going.
	return reconcile.Result{}, r.saveState(ctx, cm, *st)
}

// namesText names a few nodes.
func namesText(nodes []string) string {
	const shown = 5
	text := strings.Join(nodes[:min(len(nodes), shown)], ", ")
	if more := len(nodes) - shown; more > 0 {
		text += fmt.Sprintf(" and %d more", more)
	}
	return text
}

// nodeReadyChanged wakes the schedule when a node joins or its Ready
// condition changes: it may be due for a catch-up.
func nodeReadyChanged(old, new client.Object) bool {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := new.(*corev1.Node)
	return ok1 && ok2 && ready(o) != ready(n)
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
