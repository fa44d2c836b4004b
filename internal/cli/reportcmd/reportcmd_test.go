package reportcmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
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

func TestPrint(t *testing.T) {
	for name, tc := range map[string]struct {
		out  Output
		want string
	}{
		"a halted run": {
			out: Output{Job: "j", Phase: "Failed", Complete: true, Nodes: halted},
			want: `ImageJob j: Failed, report complete, 6 nodes: 1 succeeded, 1 failed, 3 not started, 1 skipped
NODE  OUTCOME        IMAGE                         POLICY                 SIZE  DETAIL
n1    removed        docker.io/library/nginx:1.25  Listed                       
n2    (node failed)                                PodFailed                    container remover exited with code 1
n2    (no entries)                                                              no pod left to read
n3    (not started)                                Waiting                      the run ended while this node waited for its worker pod
n4    (not started)                                WaitTimedOut                 the run gave up waiting
n5    (not started)                                FailureBudgetExceeded        the run ended before it reached this node
s1    (skipped)                                    NotReady                     the job left this node out
`,
		},
		"an old report's NotStarted, and a note": {
			out: Output{Job: "j", Phase: "Failed", Complete: true, Note: "the run of generation 2 was deleted",
				Nodes: []nodereport.Node{{Name: "a", Reason: "NotStarted", Message: "the run ended before it reached this node"}}},
			want: `ImageJob j: Failed, report complete, 1 nodes: 1 not started
note: the run of generation 2 was deleted
NODE  OUTCOME        IMAGE  POLICY      SIZE  DETAIL
a     (not started)         NotStarted        the run ended before it reached this node
`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			Print(&b, tc.out)
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeletedRun(t *testing.T) {
	ready := func(reason string) metav1.Condition {
		return metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: 3}
	}
	for name, tc := range map[string]struct {
		list *eraserv1.ImageList
		want string
	}{
		"the current run deleted": {builder.MakeImageList("l").Condition(ready(eraserv1.ReasonRunDeleted)).Obj(),
			"the run of generation 3 was deleted before it finished and has no report (its nodes' outcomes are unknown); this is the last run recorded before it"},
		"the last run failed": {builder.MakeImageList("l").Condition(ready(eraserv1.ReasonFailureBudgetExceeded)).Obj(), ""},
		"no condition":        {builder.MakeImageList("l").Obj(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := deletedRun(tc.list); got != tc.want {
				t.Errorf("note %q, want %q", got, tc.want)
			}
		})
	}
}
