package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// lastScheduleSuccess reads eraser_last_successful_run_timestamp_seconds
// {trigger="schedule"} from the registry; false when it is absent.
func lastScheduleSuccess(t *testing.T, reg *prometheus.Registry) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "eraser_last_successful_run_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == metrics.TriggerAttribute && l.GetValue() == "schedule" {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestLastSuccessSurvivesRestart: a restarted manager serves the last
// scheduled success at once, from the schedule's state, so that the
// scheduled-runs alert fires when runs keep failing after a restart.
func TestLastSuccessSurvivesRestart(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "lastsuccess-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const doc = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true}}\ncomponents: {collector: {enabled: true}}\n"
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC))
	r := NewReconciler(env.Client, record.NewFakeRecorder(100), clk, store(t, doc), nil, ns, "")
	reconcileOnce := reconciler(t, ctx, r)
	reconcileOnce()
	jobs := jobsIn(t, ctx, ns)
	if len(jobs) != 1 {
		t.Fatalf("%d scheduled jobs, want 1", len(jobs))
	}
	end := clk.Now().Add(time.Hour)
	endRun(t, ctx, &jobs[0], end)
	reconcileOnce()

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lastScheduleSuccess(t, reg); ok {
		t.Fatal("a new recorder serves a last success before any reconcile")
	}
	restarted := NewReconciler(env.Client, record.NewFakeRecorder(100), clk, store(t, doc), m, ns, "")
	reconciler(t, ctx, restarted)()
	got, ok := lastScheduleSuccess(t, reg)
	if !ok || int64(got) != end.Unix() {
		t.Errorf("after a restart the last scheduled success is %v (served %v), want %d", got, ok, end.Unix())
	}
}

// TestLastSuccessSeededAtScheduleStart: before a first success the gauge
// holds when scheduled runs were turned on, recorded in the schedule's
// state, so that the scheduled-runs alert fires on an install whose runs
// never complete, across restarts; scheduled runs turned off drop it.
func TestLastSuccessSeededAtScheduleStart(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "lastsuccess-seed-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const on = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h}}\ncomponents: {collector: {enabled: true}}\n"
	const off = "apiVersion: eraser.sh/v1alpha3\ncomponents: {collector: {enabled: false}}\n"
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC))
	installed := clk.Now()
	served := func(doc string) (float64, bool) {
		t.Helper()
		reg := prometheus.NewRegistry()
		m, err := metrics.New(reg, "")
		if err != nil {
			t.Fatal(err)
		}
		reconciler(t, ctx, NewReconciler(env.Client, record.NewFakeRecorder(100), clk, store(t, doc), m, ns, ""))()
		return lastScheduleSuccess(t, reg)
	}
	if got, ok := served(on); !ok || int64(got) != installed.Unix() {
		t.Errorf("a new install serves %v (%v), want when scheduled runs were turned on, %d", got, ok, installed.Unix())
	}
	clk.Step(50 * time.Hour)
	if got, ok := served(on); !ok || int64(got) != installed.Unix() {
		t.Errorf("after a restart it serves %v (%v), want still %d", got, ok, installed.Unix())
	}
	if _, ok := served(off); ok {
		t.Error("scheduled runs turned off before any completed: the gauge is still served")
	}
	if got, ok := served(on); !ok || int64(got) != clk.Now().Unix() {
		t.Errorf("turned on again it serves %v (%v), want %d", got, ok, clk.Now().Unix())
	}
}
