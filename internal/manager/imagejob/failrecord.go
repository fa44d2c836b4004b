package imagejob

import (
	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
)

// The status names at most MaxReportedNodes failures; the rest were known
// only to the process that saw them. status.failedIndexes records every
// failure compactly, by reason, as ranges of indexes into the job's node
// list, so that a restarted manager neither judges again a node whose pod
// it deleted (a timeout) or never created (PodMissing, with a new Event)
// nor announces a failure that was announced before.

// restoredMessage stands in for the message of a failure restored from
// status.failedIndexes: the status never shows it (the failures it names
// come first by node name, and the set only grows), and the NodeFailed
// Event and the log of the pass that found it had the original.
const restoredMessage = "failed before the manager restarted"

// encodeFailures is status.failedIndexes for the failures among targets.
func encodeFailures(targets []nodefilter.Target, failures map[string]eraserv1.NodeFailure) map[string]string {
	byReason := map[string][]int{}
	for i, t := range targets {
		if f, ok := failures[t.Name]; ok {
			byReason[f.Reason] = append(byReason[f.Reason], i)
		}
	}
	if len(byReason) == 0 {
		return nil
	}
	out := make(map[string]string, len(byReason))
	for reason, idx := range byReason {
		out[reason] = jobdata.FormatIndexes(idx)
	}
	return out
}

// decodeFailures is the failures status.failedIndexes records among targets.
// An index past the list or a malformed range (an edit by hand) is left out:
// that node is judged anew, as before the record existed.
func decodeFailures(targets []nodefilter.Target, rec map[string]string) map[string]eraserv1.NodeFailure {
	out := map[string]eraserv1.NodeFailure{}
	for name, reason := range jobdata.FailedReasons(targets, rec) {
		out[name] = eraserv1.NodeFailure{Node: name, Reason: reason, Message: restoredMessage}
	}
	return out
}

// loaded keeps the job's parsed ConfigMaps and adds to its memory the
// failures the status records beyond those it names, each marked
// announced: found, recorded and announced by an earlier process.
func (st *jobState) loaded(job *eraserv1.ImageJob, data *jobdata.Data, nodes jobdata.Nodes) {
	st.data, st.nodes = data, nodes
	for node, f := range decodeFailures(nodes.Targets, job.Status.FailedIndexes) {
		if _, named := st.failures[node]; !named {
			st.failures[node] = f
			st.announced[node] = true
		}
	}
}
