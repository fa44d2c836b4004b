// The completion phase: a report is complete only when every node of the
// job is in it. The job's node list (ConfigMap <job>-nodes, kept until the
// job itself goes) names them all; nodes without a log to read get the
// reason they have none.

package reportwriter

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// The causes of nodes that never had a worker pod (their reason is
// nodereport.KindNotStarted and the cause). A node the run never reached
// has the reason the run ended, as its Ready condition gives it:
// FailureBudgetExceeded when maxFailedNodes stopped its waves.
const (
	// CauseWaiting: the node waited for its worker pod when the run ended.
	CauseWaiting = "Waiting"
	// causeRunEnded stands for the reason the run ended when its status
	// gives none.
	causeRunEnded = "RunEnded"
)

// Why a node of the job has no entries.
const (
	noPodSucceeded = "the pod was gone before its log was read (deleted by hand, or the manager was down until the pods' cleanup); the node succeeded, and its counts are in the job's totals"
	noPodFailed    = "no pod left to read (never created, timed out and deleted, or deleted before its log was read)"
	unfinishedPod  = "the pod had not finished when the job ended"
)

// nodes reads the job's node list once per job: from the cache, else the
// API server. A job without one (made by an older manager, or its list
// deleted by hand) is completed from its pods and status alone.
func (r *Reconciler) nodes(ctx context.Context, job *eraserv1.ImageJob, st *jobState) error {
	if st.nodesRead {
		return nil
	}
	n, err := jobdata.GetNodes(ctx, r.client, r.opts.Namespace, job)
	if apierrors.IsNotFound(err) {
		n, err = jobdata.GetNodes(ctx, r.apiReader, r.opts.Namespace, job)
	}
	switch {
	case apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("report: the job's node list is gone; completing the report from its pods and status", "job", job.Name)
	case err != nil:
		return fmt.Errorf("reading job %s's node list: %w", job.Name, err)
	default:
		st.nodes = &n
	}
	st.nodesRead = true
	return nil
}

// failures looks up the failure on record of a node of the job: the status
// names up to MaxReportedNodes with their messages, and failedIndexes
// records every failure's reason against the node list (nil when gone).
func failures(job *eraserv1.ImageJob, nodes *jobdata.Nodes) func(string) (eraserv1.NodeFailure, bool) {
	named := map[string]eraserv1.NodeFailure{}
	for _, f := range job.Status.FailedNodes {
		named[f.Node] = f
	}
	var recorded map[string]string
	if nodes != nil {
		recorded = jobdata.FailedReasons(nodes.Targets, job.Status.FailedIndexes)
	}
	return func(node string) (eraserv1.NodeFailure, bool) {
		if f, ok := named[node]; ok {
			return f, true
		}
		if reason, ok := recorded[node]; ok {
			return eraserv1.NodeFailure{Node: node, Reason: reason,
				Message: fmt.Sprintf("status.failedIndexes records the reason; status.failedNodes names only the first %d", eraserv1.MaxReportedNodes)}, true
		}
		return eraserv1.NodeFailure{}, false
	}
}

// Missing is every node of the job that is neither written nor pending, with
// the reason it has no log: its failure on record, never started (not
// reached, still waiting when the run ended, or given up waiting for),
// skipped, or its pod gone. nodes is nil when the job's node list is gone:
// then only the failures the status names are known.
func Missing(job *eraserv1.ImageJob, nodes *jobdata.Nodes, written, pending map[string]bool) []nodereport.Node {
	known := func(name string) bool { return written[name] || pending[name] }
	failure := failures(job, nodes)
	var out []nodereport.Node
	if nodes == nil {
		for _, f := range job.Status.FailedNodes {
			if !known(f.Node) {
				out = append(out, failedNode(f))
			}
		}
		return out
	}
	end := endOf(job)
	started := min(job.Status.Started, len(nodes.Targets))
	waiting, firstWaiting := map[int]bool{}, -1
	for _, i := range jobdata.ParseIndexes(job.Status.WaitingIndexes, started) {
		waiting[i] = true
		if firstWaiting < 0 || i < firstWaiting {
			firstWaiting = i
		}
	}
	for i, t := range nodes.Targets {
		if known(t.Name) {
			continue
		}
		f, failed := failure(t.Name)
		switch {
		case failed:
			out = append(out, failedNode(f))
		case waiting[i]:
			out = append(out, end.waited(t.Name, job.Status.QueuedBehind, i == firstWaiting))
		case i >= started:
			out = append(out, end.notReached(t.Name))
		default:
			out = append(out, nodereport.Node{Name: t.Name, Unavailable: noPodSucceeded})
		}
	}
	for _, s := range nodes.Skipped {
		if known(s.Name) {
			continue
		}
		msg := "the job left this node out"
		if s.Detail != "" {
			msg += ": " + s.Detail
		}
		out = append(out, nodereport.Node{Name: s.Name, Reason: nodereport.Reason(nodereport.KindSkipped, s.Reason), Message: msg})
	}
	return out
}

// failedNode is a node with a failure on record and no pod to read. One the
// run gave up waiting for never had a pod: it did not start, though the
// job counts it failed.
func failedNode(f eraserv1.NodeFailure) nodereport.Node {
	if f.Reason == eraserv1.ReasonWaitTimedOut {
		return nodereport.Node{Name: f.Node, Reason: nodereport.Reason(nodereport.KindNotStarted, eraserv1.ReasonWaitTimedOut),
			Message: "the run gave up waiting to create this node's worker pod (the job counts the node failed): " + f.Message}
	}
	return nodereport.Node{Name: f.Node, Failed: true, Reason: f.Reason, Message: f.Message, Unavailable: noPodFailed}
}

// runEnd is why the run ended, as the job's Ready condition says: the
// cause of the nodes it never started.
type runEnd struct{ cause, why string }

func endOf(job *eraserv1.ImageJob) runEnd {
	c := meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady)
	switch {
	case c != nil && c.Reason == eraserv1.ReasonFailureBudgetExceeded:
		return runEnd{c.Reason, "the failure budget (maxFailedNodes) stopped it"}
	case c != nil && c.Reason != "":
		return runEnd{c.Reason, "the job failed with " + c.Reason}
	}
	return runEnd{causeRunEnded, "the job gives no reason"}
}

// notReached is a node past the run's last wave.
func (e runEnd) notReached(node string) nodereport.Node {
	return nodereport.Node{Name: node, Reason: nodereport.Reason(nodereport.KindNotStarted, e.cause),
		Message: "the run ended before it reached this node: " + e.why}
}

// waited is a node a wave reached that still waited for its worker pod
// when the run ended. behind is the run the job's first waiting node
// waited for (status.queuedBehind), first whether this is that node.
func (e runEnd) waited(node, behind string, first bool) nodereport.Node {
	msg := "this node waited for its worker pod (another run's worker was on the node or queued for it first, or the bound on worker pods in flight left no room) when the run ended: " + e.why
	switch {
	case behind != "" && first:
		msg += "; it waited behind run " + behind
	case behind != "":
		msg += "; the run's first waiting node waited behind run " + behind
	}
	return nodereport.Node{Name: node, Reason: nodereport.Reason(nodereport.KindNotStarted, CauseWaiting), Message: msg}
}

// unfinished marks the node of a pod read before it finished: the job had
// judged the node (a worker that failed leaves its siblings waiting) or
// timed it out, so the log read is all there will be.
func unfinished(n *nodereport.Node, failure func(string) (eraserv1.NodeFailure, bool)) {
	if !n.Failed {
		if f, ok := failure(n.Name); ok {
			n.Failed, n.Reason, n.Message = true, f.Reason, f.Message
		}
	}
	if n.Message != "" {
		n.Message += "; "
	}
	n.Message += unfinishedPod
}

// Unfinished lists the job's pods that had not finished, not in the report
// yet, by node name: read last, once every finished pod is.
func Unfinished(pods []corev1.Pod, written, pending map[string]bool) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if p := &pods[i]; !podspec.Finished(p) && !written[p.Spec.NodeName] && !pending[p.Spec.NodeName] {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	return out
}

// ours keeps the pods this job's UID controls: a pod labelled with its name
// may be a leftover of an earlier run of that name. It filters in place
// (pods is the pass's own list): a copy of 10,000 pod structs every pass
// was the manager's largest allocation on a 10,000-node run (1.4 GB).
func ours(pods []corev1.Pod, uid types.UID) []corev1.Pod {
	out := pods[:0]
	for _, p := range pods {
		if jobdata.SameRun(&p, uid) {
			out = append(out, p)
		}
	}
	return out
}
