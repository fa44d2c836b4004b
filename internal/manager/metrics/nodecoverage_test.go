package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestOverdue: a node counts once more than two intervals have passed
// since its time without a clean-up began.
func TestOverdue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) NodeCoverage { return NodeCoverage{From: now.Add(-d).Unix()} }
	nodes := map[string]NodeCoverage{"fresh": at(time.Hour), "edge": at(12 * time.Hour), "late": at(13 * time.Hour), "never": at(100 * time.Hour)}
	got := map[string]int{
		"6h":       Overdue(nodes, 6*time.Hour, now),
		"24h":      Overdue(nodes, 24*time.Hour, now),
		"no bound": Overdue(nodes, 0, now),
	}
	if diff := cmp.Diff(map[string]int{"6h": 2, "24h": 1, "no bound": 0}, got); diff != "" {
		t.Errorf("overdue (-want +got):\n%s", diff)
	}
}

// TestCoverageServed: the per-node record is served on the Prometheus
// endpoint under the names the chart's alert and docs use; a node never
// cleaned has no timestamp, and a forgotten node leaves no series.
func TestCoverageServed(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(reg, "")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-100 * time.Hour).Unix()
	r.Coverage(map[string]NodeCoverage{"a": {Cleaned: old, From: old}, "b": {From: old}, "gone": {Cleaned: old, From: old}}, 6*time.Hour)
	r.ForgetNode("gone")
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "node_name" {
					key += "/" + l.GetValue()
				}
			}
			if strings.HasPrefix(key, "eraser_node_last_cleaned") || strings.HasPrefix(key, "eraser_nodes_not_cleaned") {
				got[key] = m.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{"eraser_node_last_cleaned_timestamp_seconds/a": float64(old), "eraser_nodes_not_cleaned": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}
