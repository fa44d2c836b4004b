// The completion phase: a report is complete only when every node of the
// job is in it. The job's node list (ConfigMap <job>-nodes, kept until the
// job itself goes) names them all; nodes without a log to read get the
// reason they have none.

package jobreport

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/nodereport"
	"github.com/eraser-oss/eraser/internal/podspec"
)

// Reasons of nodes that have no worker log in the report.
const (
	// ReasonNotStarted: the run ended before it reached the node (the
	// failure budget stopped its waves).
	ReasonNotStarted = "NotStarted"
	// ReasonSkipped prefixes a skipped node's reason (Skipped/NotReady).
	ReasonSkipped = "Skipped/"
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
// the reason it has no log: its failure on record, never reached, skipped,
// or its pod gone. nodes is nil when the job's node list is gone: then only
// the failures the status names are known.
func Missing(job *eraserv1.ImageJob, nodes *jobdata.Nodes, written, pending map[string]bool) []nodereport.Node {
	known := func(name string) bool { return written[name] || pending[name] }
	failure := failures(job, nodes)
	var out []nodereport.Node
	if nodes == nil {
		for _, f := range job.Status.FailedNodes {
			if !known(f.Node) {
				out = append(out, nodereport.Node{Name: f.Node, Failed: true, Reason: f.Reason, Message: f.Message, Unavailable: noPodFailed})
			}
		}
		return out
	}
	for i, t := range nodes.Targets {
		if known(t.Name) {
			continue
		}
		n := nodereport.Node{Name: t.Name}
		if f, ok := failure(t.Name); ok {
			n.Failed, n.Reason, n.Message, n.Unavailable = true, f.Reason, f.Message, noPodFailed
		} else if i >= job.Status.Started {
			n.Reason, n.Message = ReasonNotStarted, "the run ended before it reached this node"
		} else {
			n.Unavailable = noPodSucceeded
		}
		out = append(out, n)
	}
	for _, s := range nodes.Skipped {
		if known(s.Name) {
			continue
		}
		msg := "the job left this node out"
		if s.Detail != "" {
			msg += ": " + s.Detail
		}
		out = append(out, nodereport.Node{Name: s.Name, Reason: ReasonSkipped + s.Reason, Message: msg})
	}
	return out
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
