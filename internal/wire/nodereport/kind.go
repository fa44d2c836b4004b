// The nodes a worker never ran on: why, in a form both the manager that
// writes a report and the plugin that prints it read.

package nodereport

import "strings"

// The reason of a node whose worker never ran is its kind and the cause,
// "NotStarted/FailureBudgetExceeded" or "Skipped/NotReady", so that a script
// can match either the kind or the exact cause.
const (
	// KindNotStarted: the node was to run a worker, but no pod was ever
	// created on it (the run ended first, or gave up waiting for it).
	KindNotStarted = "NotStarted"
	// KindSkipped: the job left the node out (not Ready, a taint the
	// workers do not tolerate, ...).
	KindSkipped = "Skipped"
)

// Reason joins a kind and a cause.
func Reason(kind, cause string) string { return kind + "/" + cause }

// Kind splits the reason of a node whose worker never ran into its kind and
// cause; a node whose worker ran (failed or not) has none. A report whose
// writer gave no cause says "NotStarted" alone.
func (n Node) Kind() (kind, cause string) {
	if n.Failed {
		return "", ""
	}
	for _, k := range []string{KindNotStarted, KindSkipped} {
		if n.Reason == k {
			return k, ""
		}
		if c, ok := strings.CutPrefix(n.Reason, k+"/"); ok {
			return k, c
		}
	}
	return "", ""
}
