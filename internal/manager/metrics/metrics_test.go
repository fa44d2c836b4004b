package metrics

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestPrometheusAndOTLP(t *testing.T) {
	var mu sync.Mutex
	var pushed []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		pushed = append(pushed, body...)
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	reg := prometheus.NewRegistry()
	r, err := New(reg, strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	r.JobFinished(12, 3, 1, map[string]NodeCounts{
		"node-a": {Removed: 2, Refused: 1, Vulnerable: 1, BytesFreed: map[string]int64{"UnusedFor": 300, "DiskPressure": 700},
			Regret: map[string]RegretCount{"UnusedFor": {Returns: 2, Bytes: 50}, "DiskPressure": {Returns: 1, Bytes: 70}}},
		"node-b": {Removed: 5, BytesFreed: map[string]int64{"DiskPressure": 1000}, ExpectedFreed: 900, Reclaimed: 1000, Regret: map[string]RegretCount{"DiskPressure": {Returns: 1, Bytes: 30}},
			ImageFs: &ImageFs{CapacityBytes: 10000, UsedBeforeBytes: 9000, UsedAfterBytes: 8000}},
	})

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = fmtFloat(m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				got[key] = fmtFloat(m.GetGauge().GetValue())
			case m.GetHistogram() != nil:
				got[key] = "count=" + fmtFloat(float64(m.GetHistogram().GetSampleCount())) + " sum=" + fmtFloat(m.GetHistogram().GetSampleSum())
			}
		}
	}
	want := map[string]string{
		"imagejob_run_total":                                      "1",
		"pods_completed_run_total":                                "3",
		"pods_failed_run_total":                                   "1",
		"imagejob_duration_run_seconds":                           "count=1 sum=12",
		"images_removed_run_total{node_name=node-a}":              "2",
		"images_removed_run_total{node_name=node-b}":              "5",
		"vulnerable_images_run_total{node_name=node-a}":           "1",
		"eraser_images_refused_run_total{node_name=node-a}":       "1",
		"eraser_bytes_freed_run_total{policy=DiskPressure}":       "1700",
		"eraser_bytes_freed_run_total{policy=UnusedFor}":          "300",
		"eraser_imagefs_capacity_bytes{node_name=node-b}":         "10000",
		"eraser_bytes_expected_freed_run_total{node_name=node-b}": "900",
		"eraser_bytes_reclaimed_run_total{node_name=node-b}":      "1000",
		"eraser_imagefs_used_before_bytes{node_name=node-b}":      "9000",
		"eraser_imagefs_used_after_bytes{node_name=node-b}":       "8000",
		"eraser_regret_returns_total{reason=UnusedFor}":           "2",
		"eraser_regret_returns_total{reason=DiskPressure}":        "2",
		"eraser_regret_bytes_total{reason=UnusedFor}":             "50",
		"eraser_regret_bytes_total{reason=DiskPressure}":          "100",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus metrics (-want +got):\n%s", diff)
	}

	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"imagejob_run_total", "pods_completed_run_total", "pods_failed_run_total", "imagejob_duration_run_seconds", "images_removed_run_total", "vulnerable_images_run_total", "eraser_images_refused_run_total", NodeAttribute,
		"eraser_bytes_freed_run_total", "eraser_imagefs_capacity_bytes", "eraser_imagefs_used_before_bytes", "eraser_imagefs_used_after_bytes", "eraser_bytes_expected_freed_run_total", "eraser_bytes_reclaimed_run_total", PolicyAttribute,
		"eraser_regret_returns_total", "eraser_regret_bytes_total", ReasonAttribute} {
		if !bytes.Contains(pushed, []byte(name)) {
			t.Errorf("OTLP push lacks %q", name)
		}
	}
}

func fmtFloat(f float64) string {
	s := strings.TrimRight(strings.TrimRight(strconvFormat(f), "0"), ".")
	if s == "" {
		return "0"
	}
	return s
}

func strconvFormat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }

// TestForgetNode: a deleted node's per-node series leave the endpoint; the
// others stay and keep counting.
func TestForgetNode(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	fs := &ImageFs{CapacityBytes: 100, UsedBeforeBytes: 90, UsedAfterBytes: 80}
	r.JobFinished(1, 2, 0, map[string]NodeCounts{"stays": {Removed: 1, ImageFs: fs}, "goes": {Removed: 4, Refused: 1, Vulnerable: 2, ImageFs: fs}})
	r.ForgetNode("goes")
	// A run that did not measure the filesystem leaves the last measure.
	r.JobFinished(1, 1, 0, map[string]NodeCounts{"stays": {Removed: 2}})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node_name" {
					got[f.GetName()+"/"+l.GetValue()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{
		"images_removed_run_total/stays":         3,
		"eraser_imagefs_capacity_bytes/stays":    100,
		"eraser_imagefs_used_before_bytes/stays": 90,
		"eraser_imagefs_used_after_bytes/stays":  80,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per-node series (-want +got):\n%s", diff)
	}
}

// TestLastSuccessfulRun: per trigger, the latest completion, which an alert
// compares with time().
func TestLastSuccessfulRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	r.JobCompleted("schedule", at)
	r.JobCompleted("schedule", at.Add(-time.Hour)) // an older job finishing late moves nothing back
	r.JobCompleted("imagelist", at.Add(time.Minute))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "eraser_last_successful_run_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == TriggerAttribute {
					got[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{"schedule": float64(at.Unix()), "imagelist": float64(at.Add(time.Minute).Unix())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("last successful run (-want +got):\n%s", diff)
	}
}

// TestConsecutiveFailedRuns: per node, the jobs in a row its worker failed;
// a success sets it back to 0, a job that did not judge the node leaves it,
// and a deleted node's series goes.
func TestConsecutiveFailedRuns(t *testing.T) {
	failed := NodeCounts{Outcome: OutcomeFailed}
	succeeded := NodeCounts{Outcome: OutcomeSucceeded}
	cases := map[string]struct {
		jobs   []map[string]NodeCounts
		forget []string
		want   map[string]float64
	}{
		"three failures in a row": {
			jobs: []map[string]NodeCounts{{"a": failed}, {"a": failed}, {"a": failed, "b": succeeded}},
			want: map[string]float64{"a": 3, "b": 0},
		},
		"a success resets the run": {
			jobs: []map[string]NodeCounts{{"a": failed}, {"a": failed}, {"a": succeeded}, {"a": failed}},
			want: map[string]float64{"a": 1},
		},
		"a job that did not judge the node leaves it": {
			jobs: []map[string]NodeCounts{{"a": failed}, {"a": {Removed: 3}}, {}, {"a": failed}},
			want: map[string]float64{"a": 2},
		},
		"a deleted node's series goes": {
			jobs:   []map[string]NodeCounts{{"a": failed, "b": failed}},
			forget: []string{"b"},
			want:   map[string]float64{"a": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			r, err := New(reg, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, perNode := range tc.jobs {
				r.JobFinished(1, 0, 0, perNode)
			}
			for _, node := range tc.forget {
				r.ForgetNode(node)
			}
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, f := range families {
				if f.GetName() != "eraser_node_consecutive_failed_runs" {
					continue
				}
				for _, m := range f.GetMetric() {
					for _, l := range m.GetLabel() {
						if l.GetName() == "node_name" {
							got[l.GetValue()] = m.GetGauge().GetValue()
						}
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("eraser_node_consecutive_failed_runs (-want +got):\n%s", diff)
			}
		})
	}
}
