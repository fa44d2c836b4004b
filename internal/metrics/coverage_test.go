package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
