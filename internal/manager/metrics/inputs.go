package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// inputsDropped counts what the manager left out of objects it does not
// own because it was over a bound (docs/protection.md): counted at the
// moment it is dropped, so that one tenant's object shows however often it
// is read. A plain Prometheus counter, like the reload gauge: it is the
// manager's own health, not a run metric, and is not pushed over OTLP.
var inputsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "eraser_inputs_dropped_total",
	Help: "Entries the manager left out of objects it does not own, by where they were read and why.",
}, []string{"source", "reason"})

func init() {
	ctrlmetrics.Registry.MustRegister(inputsDropped)
}

// The sources and reasons of eraser_inputs_dropped_total.
const (
	// SourceWorkloadImage: an image of a pod or a workload template, read
	// by the reference index.
	SourceWorkloadImage = "workload_image"
	// SourceClusterReferences: a reference left out of the cluster set a
	// wave writes, which is then incomplete.
	SourceClusterReferences = "cluster_references"
	// SourceImageListEntry: an ImageList entry left out of its run.
	SourceImageListEntry = "imagelist_entry"

	// ReasonTooLong: over the bound of its kind.
	ReasonTooLong = "too_long"
	// ReasonMalformed: it holds what no entry of its kind can (a newline
	// in an image).
	ReasonMalformed = "malformed"
	// ReasonDoesNotFit: the cluster set's parts could not hold it.
	ReasonDoesNotFit = "does_not_fit"
)

// InputsDropped adds n entries dropped from source for reason.
func InputsDropped(source, reason string, n int) {
	if n > 0 {
		inputsDropped.WithLabelValues(source, reason).Add(float64(n))
	}
}

// InputsDroppedCount is the counter's value as the metrics endpoint
// serves it, for tests.
func InputsDroppedCount(source, reason string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != "eraser_inputs_dropped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
