//go:build linux

package kubelet

// The report and status checks of TestWorkloadProtection.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// kept is what a run's report must say of one image on the node.
type kept struct{ outcome, detail string }

// jobWithReport waits until the job's report is complete and returns the
// job.
func jobWithReport(t *testing.T, name string) *eraserv1.ImageJob {
	t.Helper()
	ctx := testCtx(t)
	job := &eraserv1.ImageJob{}
	eventually(t, 2*time.Minute, "the report of job "+name+" to be complete", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, job); err != nil {
			return false, fmt.Sprintf("ImageJob %q: %v", name, err)
		}
		rep := job.Status.Report
		return rep != nil && rep.Complete, fmt.Sprintf("report %+v", rep)
	})
	return job
}

// jobNodes is the job's report of the nodes that ran.
func jobNodes(t *testing.T, job *eraserv1.ImageJob) []nodereport.Node {
	t.Helper()
	shards, err := reportshards.Shards(testCtx(t), kube, job.Status.Report.Namespace, job)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ran(nodes)
}

// checkKept compares the report's entries of the test's node with want
// (image tag → outcome and the start of its detail; "" checks no detail).
func checkKept(t *testing.T, w *protected, job *eraserv1.ImageJob, want map[string]kept) {
	t.Helper()
	var node *nodereport.Node
	for _, n := range jobNodes(t, job) {
		if n.Name == w.node.Name {
			node = &n
		}
	}
	if node == nil {
		t.Fatalf("job %s: no report of node %s", job.Name, w.node.Name)
	}
	byID := map[string]nodereport.Entry{}
	for _, e := range node.Entries {
		if e.ID != "" {
			byID[e.ID] = e
		}
	}
	for tag, k := range want {
		e, ok := byID[w.ids[tag]]
		switch {
		case !ok:
			t.Errorf("job %s, node %s: no entry for %s (%s); want %q", job.Name, node.Name, tag, w.ids[tag], k.outcome)
		case e.Outcome != k.outcome || !strings.HasPrefix(e.Detail, k.detail):
			t.Errorf("job %s, node %s: %s %q (%s); want %q (%s...)", job.Name, node.Name, tag, e.Outcome, e.Detail, k.outcome, k.detail)
		}
	}
}

// checkTotals: the job's status (and its ImageList's, list, when it has
// one) counts the kept images as the nodes' reports do, the test's among
// them.
func checkTotals(t *testing.T, job *eraserv1.ImageJob, list *eraserv1.ImageResults) {
	t.Helper()
	referenced, notRepullable := int64(0), int64(0)
	for _, n := range jobNodes(t, job) {
		referenced += int64(n.Counts["referenced"])
		notRepullable += int64(n.Counts["not re-pullable"])
	}
	totals := map[string]*eraserv1.ImageResults{"ImageJob " + job.Name: job.Status.Results}
	if list != nil {
		totals["its ImageList"] = list
	}
	for what, r := range totals {
		switch {
		case r == nil:
			t.Errorf("%s: no results", what)
		case r.Referenced < 3 || r.NotRepullable < 1:
			t.Errorf("%s: referenced %d, not re-pullable %d; want at least the test's 3 and 1", what, r.Referenced, r.NotRepullable)
		case r.Referenced != referenced || r.NotRepullable != notRepullable:
			t.Errorf("%s: referenced %d, not re-pullable %d; the nodes' reports count %d and %d", what, r.Referenced, r.NotRepullable, referenced, notRepullable)
		}
	}
}

// deleteJobs deletes the jobs the configuration keeps for their reports.
func deleteJobs(t *testing.T) {
	t.Helper()
	if err := kube.DeleteAllOf(testCtx(t), &eraserv1.ImageJob{}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	expectJobsCleanedUp(t)
}
