package imagejob

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// TestReportsToDrop: the oldest finished, droppable reports go first until
// all fit the bound; running jobs', unrecorded jobs' and incomplete reports
// count but are kept.
func TestReportsToDrop(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	done := func(job string, mib int64, hoursAgo int) keptReport {
		return keptReport{Job: job, Bytes: mib << 20, Finished: t0.Add(-time.Duration(hoursAgo) * time.Hour), Droppable: true}
	}
	running := keptReport{Job: "running", Bytes: 40 << 20}
	unrecorded := keptReport{Job: "unrecorded", Bytes: 30 << 20, Finished: t0.Add(-48 * time.Hour)}
	type result struct {
		Drop  []string
		Total int64
	}
	cases := map[string]struct {
		reports []keptReport
		bound   int64
		want    result
	}{
		"within the bound": {
			reports: []keptReport{done("a", 10, 3), done("b", 10, 2)}, bound: 20 << 20,
			want: result{Total: 20 << 20}},
		"oldest first, until within": {
			reports: []keptReport{done("new", 20, 1), done("old", 20, 5), done("mid", 20, 3)}, bound: 30 << 20,
			want: result{Drop: []string{"old", "mid"}, Total: 60 << 20}},
		"a running job's report counts, and is kept": {
			reports: []keptReport{running, done("a", 20, 2), done("b", 20, 1)}, bound: 50 << 20,
			want: result{Drop: []string{"a", "b"}, Total: 80 << 20}},
		"not droppable, however old": {
			reports: []keptReport{unrecorded, done("a", 20, 1)}, bound: 10 << 20,
			want: result{Drop: []string{"a"}, Total: 50 << 20}},
		"ended at once: by name": {
			reports: []keptReport{done("b", 20, 1), done("a", 20, 1)}, bound: 20 << 20,
			want: result{Drop: []string{"a"}, Total: 40 << 20}},
		"no bound": {
			reports: []keptReport{done("a", 500, 1)}, bound: 0,
			want: result{Total: 500 << 20}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		var r result
		r.Drop, r.Total = reportsToDrop(tc.reports, tc.bound)
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reportsToDrop (-want +got):\n%s", diff)
	}
}

// TestReportsBoundedForTheCluster: with a bound of 1.25 MiB and three
// finished jobs' reports of 0.5 MiB each, the oldest job goes with its report
// (its Event says why) and the two newer stay; a running job's report,
// which puts the total over again, is kept, and the oldest finished one
// goes instead.
func TestReportsBoundedForTheCluster(t *testing.T) {
	f := newFixture(t)
	doc := []byte(baseConfig + "manager: {imageJob: {cleanup: {maxReportSize: 1280Ki}}}\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := f.newReconciler(func(o *Options) { o.Config = eraserconfig.NewStore(cfg, doc) })
	prefix := fmt.Sprintf("bound-%s-", f.ns)
	finished := func(name string, age time.Duration) *eraserv1.ImageJob {
		job := builder.MakeImageJob(prefix + name).Obj()
		if err := env.Client.Create(f.ctx, job); err != nil {
			t.Fatal(err)
		}
		end := metav1.NewTime(f.clock.Now().Add(-age))
		keep := metav1.NewTime(f.clock.Now().Add(24 * time.Hour))
		job.Status = eraserv1.ImageJobStatus{Phase: eraserv1.PhaseCompleted, CompletionTime: &end, DeleteAfter: &end,
			Report: &eraserv1.ReportRef{Namespace: f.ns, Selector: nodereport.Selector(job.Name), Complete: true, DeleteAfter: &keep}}
		if err := env.Client.Status().Update(f.ctx, job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	shard := func(job *eraserv1.ImageJob) {
		cm := nodereport.ConfigMap(job, f.ns, 0, nodereport.Shard{Nodes: []string{"n"}, Data: make([]byte, 512<<10)})
		if err := env.Client.Create(f.ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []*eraserv1.ImageJob{finished("old", 3*time.Hour), finished("mid", 2*time.Hour), finished("new", time.Hour)} {
		shard(j)
	}
	left := func() []string {
		t.Helper()
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(f.ctx, &jobs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs.Items {
			if strings.HasPrefix(j.Name, prefix) && j.DeletionTimestamp.IsZero() {
				out = append(out, strings.TrimPrefix(j.Name, prefix))
			}
		}
		return out
	}
	pass := func(name string) {
		t.Helper()
		f.clock.Step(reportSweepInterval)
		f.settle()
		f.r = r
		f.reconcile(prefix + name)
	}
	pass("new")
	if diff := cmp.Diff([]string{"mid", "new"}, left()); diff != "" {
		t.Errorf("jobs left (-want +got):\n%s", diff)
	}
	var shards corev1.ConfigMapList
	if err := env.Client.List(f.ctx, &shards, client.InNamespace(f.ns), client.MatchingLabels{nodereport.LabelReport: prefix + "old"}); err != nil || len(shards.Items) != 0 {
		t.Errorf("the dropped job's report: %d shards left, %v", len(shards.Items), err)
	}
	if ev := f.events(); !strings.Contains(ev, "Warning ReportDropped deleted with its report (512.0KiB) before keepReportFor") {
		t.Errorf("no ReportDropped Event; events:\n%s", ev)
	}

	// A running job's report: kept; the oldest finished one goes.
	running := builder.MakeImageJob(prefix + "running").Obj()
	if err := env.Client.Create(f.ctx, running); err != nil {
		t.Fatal(err)
	}
	running.Status = eraserv1.ImageJobStatus{Phase: eraserv1.PhaseRunning}
	if err := env.Client.Status().Update(f.ctx, running); err != nil {
		t.Fatal(err)
	}
	shard(running)
	pass("new")
	if diff := cmp.Diff([]string{"new", "running"}, left()); diff != "" {
		t.Errorf("jobs left with a running job's report (-want +got):\n%s", diff)
	}
}
