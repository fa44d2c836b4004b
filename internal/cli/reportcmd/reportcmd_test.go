package reportcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// halted is the report of a run its failure budget stopped: one node ran,
// one failed, one waited, one was given up waiting for, one never reached,
// one skipped.
var halted = []nodereport.Node{
	{Name: "n1", Counts: map[string]int{"removed": 1}, Entries: []nodereport.Entry{{Image: "docker.io/library/nginx:1.25", Outcome: "removed", Policy: "Listed"}}},
	{Name: "n2", Failed: true, Reason: "PodFailed", Message: "container remover exited with code 1", Unavailable: "no pod left to read"},
	{Name: "n3", Reason: "NotStarted/Waiting", Message: "the run ended while this node waited for its worker pod"},
	{Name: "n4", Reason: "NotStarted/WaitTimedOut", Message: "the run gave up waiting"},
	{Name: "n5", Reason: "NotStarted/FailureBudgetExceeded", Message: "the run ended before it reached this node"},
	{Name: "s1", Reason: "Skipped/NotReady", Message: "the job left this node out"},
}

func TestSummarize(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes []nodereport.Node
		want  Summary
		text  string
	}{
		"a halted run":  {halted, Summary{Succeeded: 1, Failed: 1, NotStarted: 3, Skipped: 1}, "1 succeeded, 1 failed, 3 not started, 1 skipped"},
		"no nodes":      {nil, Summary{}, ""},
		"an old report": {[]nodereport.Node{{Name: "a", Reason: "NotStarted", Message: "the run ended before it reached this node"}}, Summary{NotStarted: 1}, "1 not started"},
		// A node whose pod was gone before its log was read succeeded.
		"entries unavailable": {[]nodereport.Node{{Name: "a", Unavailable: "the pod was gone"}}, Summary{Succeeded: 1}, "1 succeeded"},
		// A reason this plugin does not know is a worker that did not run.
		"an unknown reason": {[]nodereport.Node{{Name: "a", Reason: "Later/Something"}}, Summary{NotStarted: 1}, "1 not started"},
	} {
		t.Run(name, func(t *testing.T) {
			got := Summarize(tc.nodes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if got.String() != tc.text {
				t.Errorf("text %q, want %q", got.String(), tc.text)
			}
		})
	}
}
