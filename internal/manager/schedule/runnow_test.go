package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestRunNow on the real API server: run-now on the state ConfigMap starts
// a scheduled run a day before the interval is up, counts as a run (the
// next is an interval after it ends), and is refused with a Warning Event
// while a scheduled run goes or when the collector is disabled; it is
// consumed every time.
func TestRunNow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "schedule-runnow"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Scheduled jobs are cluster-scoped and found by label: start from none
	// and leave none to the other tests.
	deleteJobs := func() error {
		return env.Client.DeleteAllOf(ctx, &eraserv1.ImageJob{}, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector})
	}
	if err := deleteJobs(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteJobs() })
	const on = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 24h, beginImmediately: false}}\ncomponents: {collector: {enabled: true}}\n"
	s := store(t, on)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	r := NewReconciler(env.Client, env.Recorder(t), clk, s, nil, ns, "")
	reconcileOnce := reconciler(t, ctx, r)
	stateKey := client.ObjectKey{Namespace: ns, Name: StateName}
	request := func() {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, stateKey, cm); err != nil {
			t.Fatal(err)
		}
		cm.Annotations = map[string]string{eraserv1.AnnotationRunNow: "true"}
		if err := env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	consumed := func(what string) {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, stateKey, cm); err != nil {
			t.Fatal(err)
		}
		if runnow.Requested(cm) {
			t.Errorf("%s: request not consumed: %v", what, cm.Annotations)
		}
	}
	refusedWith := func(text string) {
		t.Helper()
		testenv.WaitFor(t, 10*time.Second, "a RunNowRefused Warning saying "+text, func() bool {
			for _, e := range env.Events(t, ns, StateName, eraserv1.ReasonRunNowRefused) {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, text) {
					return true
				}
			}
			return false
		})
	}

	// The first pass creates the state, to be annotated, and waits a day.
	if wait := reconcileOnce(); wait != 24*time.Hour || len(scheduledJobs(t, ctx)) != 0 {
		t.Fatalf("first pass: next in %v with %d jobs", wait, len(scheduledJobs(t, ctx)))
	}
	request()
	clk.Step(time.Minute)
	reconcileOnce()
	jobs := scheduledJobs(t, ctx)
	if len(jobs) != 1 || !strings.HasPrefix(jobs[0].Name, "imagejob-scheduled-now-") {
		t.Fatalf("jobs after run-now: %v", jobs)
	}
	consumed("started")
	testenv.WaitFor(t, 10*time.Second, "a RunNow event on the state ConfigMap", func() bool {
		return len(env.Events(t, ns, StateName, eraserv1.ReasonRunNow)) == 1
	})
	if st, _, err := r.state(ctx); err != nil || !st.LastStart.Equal(clk.Now()) {
		t.Errorf("state after run-now: %+v, %v; want the start recorded", st, err)
	}

	// Refused while it runs.
	request()
	reconcileOnce()
	if n := len(scheduledJobs(t, ctx)); n != 1 {
		t.Errorf("%d jobs after a refused run-now, want 1", n)
	}
	consumed("refused")
	refusedWith(jobs[0].Name)

	// It counts as a run: the next is an interval after it ended.
	clk.Step(time.Hour)
	job := jobs[0]
	endRun(t, ctx, &job, clk.Now())
	if wait := reconcileOnce(); wait != 24*time.Hour {
		t.Errorf("next run in %v after a run-now run ended, want 24h", wait)
	}
	if err := env.Client.Delete(ctx, &job); err != nil {
		t.Fatal(err)
	}

	// Refused without the collector.
	cfg, raw, _ := store(t, "apiVersion: eraser.sh/v1alpha3\n").Get()
	s.Set(cfg, raw)
	request()
	reconcileOnce()
	if n := len(scheduledJobs(t, ctx)); n != 0 {
		t.Errorf("%d jobs with the collector disabled", n)
	}
	consumed("disabled")
	refusedWith("components.collector.enabled is false")
}
