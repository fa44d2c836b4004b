package metrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// NodeCoverage is one eligible node in the schedule's per-node record, in
// unix seconds.
type NodeCoverage struct {
	// Cleaned is when the scheduled run (or catch-up) its worker last
	// succeeded in was created; 0 if none since the record began.
	Cleaned int64
	// From is when the node's time without a clean-up counts from: its
	// last success, or when it joined or the record began if later.
	From int64
}

// coverage is the schedule's per-node record, as last computed.
type coverage struct {
	nodes    map[string]NodeCoverage
	interval time.Duration
	known    bool
}

// Overdue counts the nodes not cleaned within two intervals at now. It is
// pure.
func Overdue(nodes map[string]NodeCoverage, interval time.Duration, now time.Time) int {
	if interval <= 0 {
		return 0
	}
	n := 0
	for _, c := range nodes {
		if now.Sub(time.Unix(c.From, 0)) > 2*interval {
			n++
		}
	}
	return n
}

// registerCoverage adds the schedule's per-node gauges. The overdue count
// is computed when it is read, so that it grows between two runs without
// the manager doing anything.
func (r *Recorder) registerCoverage(m metric.Meter) error {
	cleaned, err := m.Int64ObservableGauge("eraser_node_last_cleaned_timestamp_seconds", metric.WithUnit("s"),
		metric.WithDescription("When the scheduled run (or catch-up) in which the node's worker last succeeded was created, in seconds since the epoch."))
	if err != nil {
		return err
	}
	overdue, err := m.Int64ObservableGauge("eraser_nodes_not_cleaned",
		metric.WithDescription("Eligible nodes whose worker has not succeeded in a scheduled run or catch-up for two intervals (counted from when a node joined, for new nodes)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.coverage.known {
			return nil
		}
		o.ObserveInt64(overdue, int64(Overdue(r.coverage.nodes, r.coverage.interval, time.Now())))
		for node, c := range r.coverage.nodes {
			if c.Cleaned > 0 {
				o.ObserveInt64(cleaned, c.Cleaned, metric.WithAttributes(attribute.String(NodeAttribute, node)))
			}
		}
		return nil
	}, cleaned, overdue)
	return err
}

// Coverage replaces the schedule's per-node record, of the eligible nodes.
func (r *Recorder) Coverage(nodes map[string]NodeCoverage, interval time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.coverage = coverage{nodes: nodes, interval: interval, known: true}
}
