package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// exclusionsLegacy counts, per exclusion-list ConfigMap, what the workers
// read differently from upstream Eraser (docs/configuration.md): a list
// that moved from upstream keeps working, and this says it should be
// rewritten. A plain Prometheus gauge, the manager's own view of its
// inputs, like eraser_inputs_dropped_total; set each time a run's lists
// are read, so that a fixed list drops to nothing.
var exclusionsLegacy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "eraser_exclusion_entries_legacy",
	Help: "Entries and fields of exclusion-list ConfigMaps read differently from upstream Eraser, as of the last run's start, by ConfigMap.",
}, []string{"configmap"})

func init() {
	ctrlmetrics.Registry.MustRegister(exclusionsLegacy)
}

// SetExclusionsLegacy replaces the counts: one per ConfigMap read, 0 for a
// list with nothing legacy.
func SetExclusionsLegacy(counts map[string]int) {
	exclusionsLegacy.Reset()
	for cm, n := range counts {
		exclusionsLegacy.WithLabelValues(cm).Set(float64(n))
	}
}

// ExclusionsLegacy is the gauge's values as the metrics endpoint serves
// them, for tests.
func ExclusionsLegacy() map[string]float64 {
	out := map[string]float64{}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return nil
	}
	for _, f := range families {
		if f.GetName() != "eraser_exclusion_entries_legacy" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "configmap" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// otherManagers is the number of other Eraser managers found acting on
// the same CRDs, while they hold this one back; 0 once none does.
var otherManagers = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "eraser_other_managers",
	Help: "Eraser managers in other namespaces acting on the same eraser.sh CRDs (upstream's, the AKS Image Cleaner add-on, another install); while any does, this manager runs nothing.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(otherManagers)
}

// SetOtherManagers sets eraser_other_managers.
func SetOtherManagers(n int) { otherManagers.Set(float64(n)) }
