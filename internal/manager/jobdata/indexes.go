package jobdata

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
)

// Indexes into a job's node list, written compactly in its status
// (failedIndexes, waitingIndexes) as ranges such as "0-3,7".

// FormatIndexes writes ascending indexes as "0-3,7".
func FormatIndexes(idx []int) string {
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

// ParseIndexes reads FormatIndexes's output, the indexes below n only,
// skipping what it cannot read.
func ParseIndexes(s string, n int) []int {
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

// FailedReasons is the reason status.failedIndexes records for each failed
// node of targets, by node name. An index past the list or a malformed
// range (an edit by hand) is left out.
func FailedReasons(targets []nodefilter.Target, failedIndexes map[string]string) map[string]string {
	out := map[string]string{}
	for reason, ranges := range failedIndexes {
		for _, i := range ParseIndexes(ranges, len(targets)) {
			out[targets[i].Name] = reason
		}
	}
	return out
}
