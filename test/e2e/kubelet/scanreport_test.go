//go:build linux

package kubelet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// scanVerdictsInReport waits for a scheduled run's complete report that
// carries, per node, the scanner's verdict on each image it judged and what
// decided it, read from the real scanner's log on real nodes: the
// vulnerable image with the fixture DB's finding (scanned on two nodes, the
// second confirming), the fixed one clean (scanned on one), shared with the
// others, and the DB each node
// judged with (served, when the manager fetched it for the cluster: the
// same archive on every node); kubectl eraser report shows them. It
// returns the run's job.
func scanVerdictsInReport(t *testing.T, nodes []Node, vulnerable, fixed string, served bool) *eraserv1.ImageJob {
	t.Helper()
	ctx := testCtx(t)
	want := workerresult.Finding{ID: "CVE-2099-0001", Severity: "CRITICAL", Package: "musl", FixedVersion: "1.2.5-r0"}
	var job *eraserv1.ImageJob
	eventually(t, 2*time.Minute, "a complete report with the scanner's verdicts on every node", func() (bool, string) {
		var jobs eraserv1.ImageJobList
		if err := kube.List(ctx, &jobs); err != nil {
			return false, err.Error()
		}
		var why []string
		for i := range jobs.Items {
			j := &jobs.Items[i]
			if rep := j.Status.Report; rep == nil || !rep.Complete {
				why = append(why, j.Name+": report not complete")
				continue
			}
			problem := verdictProblem(ctx, j, nodes, vulnerable, fixed, want, served)
			if problem == "" {
				job = j
				return true, ""
			}
			why = append(why, j.Name+": "+problem)
		}
		return false, strings.Join(why, "; ")
	})
	out := kubectlEraser(t, "report", "imagejob/"+job.Name, "--node", nodes[0].Name)
	for _, s := range []string{"vulnerability DB: schema 2, built", vulnerable, "vulnerable", "CVE-2099-0001 CRITICAL musl (fixed in 1.2.5-r0)", fixed, "clean"} {
		if !strings.Contains(out, s) {
			t.Errorf("kubectl eraser report lacks %q:\n%s", s, out)
		}
	}
	return job
}

// endScannedRuns turns the scanned runs off (config after) and deletes the
// jobs their keepReportFor keeps.
func endScannedRuns(t *testing.T, after string) {
	t.Helper()
	setConfig(t, after)
	if err := kube.DeleteAllOf(testCtx(t), &eraserv1.ImageJob{}); err != nil {
		t.Fatal(err)
	}
}

// reportNodes reads the nodes of a job's report that ran.
func reportNodes(ctx context.Context, job *eraserv1.ImageJob) ([]nodereport.Node, error) {
	shards, err := reportshards.Shards(ctx, kube, job.Status.Report.Namespace, job)
	if err != nil {
		return nil, err
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil {
		return nil, err
	}
	return ran(nodes), nil
}

// verdictProblem says what the job's report lacks, "" for nothing.
func verdictProblem(ctx context.Context, job *eraserv1.ImageJob, want []Node, vulnerable, fixed string, finding workerresult.Finding, served bool) string {
	nodes, err := reportNodes(ctx, job)
	if err != nil {
		return err.Error()
	}
	if len(nodes) != len(want) {
		return fmt.Sprintf("%d nodes in the report, want %d", len(nodes), len(want))
	}
	// The clean image is scanned on one node, the vulnerable one on two
	// (a second node confirms a verdict that removes); the others judge
	// each by those nodes' verdict, through the manager's scan service.
	scannedOn := map[string][]string{}
	for _, n := range nodes {
		for _, e := range n.Entries {
			if e.Scan != nil && e.Scan.From == nil {
				scannedOn[e.Image] = append(scannedOn[e.Image], n.Name)
			}
		}
	}
	for image, times := range map[string]int{vulnerable: min(2, len(nodes)), fixed: 1} {
		if len(scannedOn[image]) != times {
			return fmt.Sprintf("%s scanned on %v, want on %d node(s), the others taking their verdict", image, scannedOn[image], times)
		}
	}
	archives := map[string]bool{}
	for _, n := range nodes {
		if n.ScanDB == nil || n.ScanDB.Version != 2 || n.ScanDB.UpdatedAt == nil {
			return fmt.Sprintf("node %s: DB %+v", n.Name, n.ScanDB)
		}
		if (n.ScanDB.Archive != "") != served {
			return fmt.Sprintf("node %s: DB archive %q (the manager's copy: %v)", n.Name, n.ScanDB.Archive, served)
		}
		archives[n.ScanDB.Archive] = true
		verdicts := map[string]*workerresult.Scan{}
		for _, e := range n.Entries {
			if e.Scan != nil {
				verdicts[e.Image] = e.Scan
			}
		}
		v, f := verdicts[vulnerable], verdicts[fixed]
		if v == nil || v.Verdict != "vulnerable" || !v.Remove || len(v.Findings) != 1 || v.Findings[0] != finding {
			return fmt.Sprintf("node %s: verdict on %s %+v", n.Name, vulnerable, v)
		}
		if f == nil || f.Verdict != "clean" || f.Remove {
			return fmt.Sprintf("node %s: verdict on %s %+v", n.Name, fixed, f)
		}
	}
	if len(archives) != 1 {
		return fmt.Sprintf("the nodes judged with %d DB archives, want one for the run", len(archives))
	}
	return ""
}

// ran leaves out the nodes a job skipped (the report names those too, with
// why), so that a report is compared with the nodes that ran.
func ran(nodes []nodereport.Node) []nodereport.Node {
	out := nodes[:0:0]
	for _, n := range nodes {
		if !strings.HasPrefix(n.Reason, "Skipped/") {
			out = append(out, n)
		}
	}
	return out
}
