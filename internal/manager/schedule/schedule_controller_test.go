package schedule

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

func store(t *testing.T, doc string) *eraserconfig.Store {
	t.Helper()
	cfg, _, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return eraserconfig.NewStore(cfg, []byte(doc))
}

func scheduledJobs(t *testing.T, ctx context.Context) []eraserv1.ImageJob {
	t.Helper()
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
		t.Fatal(err)
	}
	return jobs.Items
}

// TestScheduledRuns: a run at once, none while it runs, the next one an
// interval after it ended, none extra after a restart; and disabling the
// collector stops new runs without a restart.
func TestScheduledRuns(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "schedule-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const on = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true}}\ncomponents: {collector: {enabled: true}}\n"
	s := store(t, on)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	r := NewReconciler(env.Client, record.NewFakeRecorder(100), clk, s, nil, ns, "")
	reconcileOnce := reconciler(t, ctx, r)

	reconcileOnce()
	jobs := scheduledJobs(t, ctx)
	if len(jobs) != 1 {
		t.Fatalf("%d scheduled jobs, want 1 at once", len(jobs))
	}
	data, err := jobdata.Get(ctx, env.Client, ns, &jobs[0])
	if err != nil || data.Kind != podspec.KindCollector {
		t.Fatalf("job data %+v, %v", data, err)
	}
	reconcileOnce()
	if n := len(scheduledJobs(t, ctx)); n != 1 {
		t.Fatalf("%d jobs: a second run started while the first was going", n)
	}

	// The run ends an hour later and is cleaned up.
	clk.Step(time.Hour)
	job := jobs[0]
	endRun(t, ctx, &job, clk.Now())
	if wait := reconcileOnce(); wait != 6*time.Hour {
		t.Errorf("next run in %v, want 6h after the end", wait)
	}
	// Recorded: the job may now be cleaned up.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&job), &job); err != nil || job.Annotations[eraserv1.AnnotationRecorded] != "true" {
		t.Errorf("finished job not marked recorded: %v %v", job.Annotations, err)
	}
	if err := env.Client.Delete(ctx, &job); err != nil {
		t.Fatal(err)
	}

	// A restarted manager keeps the rhythm instead of running at once.
	r = NewReconciler(env.Client, record.NewFakeRecorder(100), clk, s, nil, ns, "")
	if wait := reconcileOnce(); wait != 6*time.Hour || len(scheduledJobs(t, ctx)) != 0 {
		t.Errorf("after a restart: next in %v with %d jobs; want 6h and none", wait, len(scheduledJobs(t, ctx)))
	}

	// Disabled by a configuration change: no run when the time comes.
	off := store(t, "apiVersion: eraser.sh/v1alpha3\n")
	cfg, raw, _ := off.Get()
	s.Set(cfg, raw)
	clk.Step(7 * time.Hour)
	reconcileOnce()
	if n := len(scheduledJobs(t, ctx)); n != 0 {
		t.Errorf("%d jobs with the collector disabled", n)
	}
	cfg, raw, _ = store(t, on).Get()
	s.Set(cfg, raw)
	reconcileOnce()
	if n := len(scheduledJobs(t, ctx)); n != 1 {
		t.Errorf("%d jobs after enabling the collector again, want 1", n)
	}

	// manager.scheduling.dryRun: the next run's workers remove nothing.
	job = scheduledJobs(t, ctx)[0]
	endRun(t, ctx, &job, clk.Now())
	reconcileOnce()
	if err := env.Client.Delete(ctx, &job); err != nil {
		t.Fatal(err)
	}
	cfg, raw, _ = store(t, "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, dryRun: true}}\ncomponents: {collector: {enabled: true}}\n").Get()
	s.Set(cfg, raw)
	clk.Step(7 * time.Hour)
	reconcileOnce()
	jobs = scheduledJobs(t, ctx)
	if len(jobs) != 1 {
		t.Fatalf("%d jobs with dryRun set, want 1", len(jobs))
	}
	data, err = jobdata.Get(ctx, env.Client, ns, &jobs[0])
	if err != nil || !data.DryRun || jobs[0].Annotations[eraserv1.AnnotationDryRun] != "true" {
		t.Errorf("dry-run job: data %+v, annotations %v, %v", data, jobs[0].Annotations, err)
	}
}

// endRun marks a scheduled job Completed at the given time, as the ImageJob
// controller would.
func endRun(t *testing.T, ctx context.Context, job *eraserv1.ImageJob, at time.Time) {
	t.Helper()
	end := metav1.NewTime(at)
	job.Status = eraserv1.ImageJobStatus{Phase: eraserv1.PhaseCompleted, CompletionTime: &end}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// reconciler returns a function running one pass of r and returning its
// requeue delay; an error fails the test.
func reconciler(t *testing.T, ctx context.Context, r *Reconciler) func() time.Duration {
	return func() time.Duration {
		t.Helper()
		res, err := r.Reconcile(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
}
