// Package metrics records upstream Eraser's run metrics on the manager's
// Prometheus endpoint, once per finished job.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Recorder holds the manager's job metrics.
type Recorder struct {
	jobs          prometheus.Counter
	podsCompleted prometheus.Counter
	podsFailed    prometheus.Counter
	duration      prometheus.Histogram
	removed       prometheus.Counter
}

// New creates the metrics and registers them with reg (nil: controller-runtime's
// registry, served on the metrics endpoint).
func New(reg prometheus.Registerer) *Recorder {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	r := &Recorder{
		jobs:          prometheus.NewCounter(prometheus.CounterOpts{Name: "imagejob_run_total", Help: "Finished ImageJobs."}),
		podsCompleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "pods_completed_run_total", Help: "Worker pods that succeeded."}),
		podsFailed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "pods_failed_run_total", Help: "Worker pods that failed, timed out or lost their node."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "imagejob_duration_run_seconds", Help: "Time from an ImageJob's start to its last node finishing.",
			Buckets: []float64{0, 10, 20, 30, 40, 50, 60, 120, 300, 600, 1800, 3600},
		}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "images_removed_run_total", Help: "Images removed, as the removers reported them."}),
	}
	reg.MustRegister(r.jobs, r.podsCompleted, r.podsFailed, r.duration, r.removed)
	return r
}

// JobFinished records one finished job.
func (r *Recorder) JobFinished(seconds float64, succeeded, failed int, removed int64) {
	if r == nil {
		return
	}
	r.jobs.Inc()
	r.podsCompleted.Add(float64(succeeded))
	r.podsFailed.Add(float64(failed))
	r.duration.Observe(seconds)
	r.removed.Add(float64(removed))
}
