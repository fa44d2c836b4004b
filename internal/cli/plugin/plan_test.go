package plugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestSummarize(t *testing.T) {
	removed := func(img string, bytes uint64) nodereport.Entry {
		return nodereport.Entry{Image: img, Outcome: string(workerresult.Removed), Bytes: bytes}
	}
	out := reportcmd.Output{Job: "imagejob-eraser-plan-1", Complete: true, Nodes: []nodereport.Node{
		{Name: "a", Entries: []nodereport.Entry{removed("nginx:1", 100), removed("redis:7", 50), {Image: "pause:3", Outcome: "kept"}}},
		{Name: "b", Entries: []nodereport.Entry{removed("nginx:1", 100)}},
		{Name: "c", Unavailable: "the log was gone", Counts: map[string]int{string(workerresult.Removed): 4}, BytesFreed: 400},
		{Name: "d", Failed: true, Reason: "PodFailed"},
		{Name: "e", Reason: "FailureBudgetExceeded"},
	}}
	want := Plan{
		Job: "imagejob-eraser-plan-1", Complete: true,
		Nodes: []PlanNode{{Name: "a", Images: 2, Bytes: 150}, {Name: "b", Images: 1, Bytes: 100},
			{Name: "c", Images: 4, Bytes: 400, Unavailable: "the log was gone"}},
		Images:      []PlanImg{{Image: "nginx:1", Nodes: 2, Bytes: 200}, {Image: "redis:7", Nodes: 1, Bytes: 50}},
		TotalImages: 7, TotalBytes: 650,
		Kept:      map[string]int{"kept": 1},
		NotJudged: []string{"d", "e"},
	}
	if diff := cmp.Diff(want, Summarize(out)); diff != "" {
		t.Errorf("Summarize (-want +got):\n%s", diff)
	}
	var b strings.Builder
	PrintPlan(&b, want)
	for _, line := range []string{`would remove 7 images, 650B, on 3 nodes`, "Not judged (the worker failed or did not run): d, e", "images not named: the log was gone"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}
}
