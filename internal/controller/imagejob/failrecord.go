package imagejob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/nodefilter"
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
		out[reason] = formatRanges(idx)
	}
	return out
}

// decodeFailures is the failures status.failedIndexes records among targets.
// An index past the list or a malformed range (an edit by hand) is left out:
// that node is judged anew, as before the record existed.
func decodeFailures(targets []nodefilter.Target, rec map[string]string) map[string]eraserv1.NodeFailure {
	out := map[string]eraserv1.NodeFailure{}
	for reason, ranges := range rec {
		for _, i := range parseRanges(ranges, len(targets)) {
			name := targets[i].Name
			out[name] = eraserv1.NodeFailure{Node: name, Reason: reason, Message: restoredMessage}
		}
	}
	return out
}

// formatRanges writes ascending indexes as "0-3,7".
func formatRanges(idx []int) string {
	var b strings.Builder
	for k := 0; k < len(idx); {
		end := k
		for end+1 < len(idx) && idx[end+1] == idx[end]+1 {
			end++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if end == k {
			fmt.Fprintf(&b, "%d", idx[k])
		} else {
			fmt.Fprintf(&b, "%d-%d", idx[k], idx[end])
		}
		k = end + 1
	}
	return b.String()
}

// parseRanges reads formatRanges's output, the indexes below n only,
// skipping what it cannot read.
func parseRanges(s string, n int) []int {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 || first >= n {
			continue
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				continue
			}
			last = min(last, n-1)
		}
		for i := first; i <= last; i++ {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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
