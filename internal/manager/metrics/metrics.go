// Package metrics records upstream Eraser's run metrics with OpenTelemetry,
// once per finished job, and serves them two ways: pushed over OTLP/HTTP to
// manager.otlpEndpoint (as upstream), and on the manager's Prometheus
// endpoint, so that no OpenTelemetry collector is needed to read them.
package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// NodeAttribute is upstream's attribute for per-node figures; Prometheus
// shows it as node_name.
const NodeAttribute = "node name"

// PolicyAttribute names the retention policy that chose the removed images.
const PolicyAttribute = "policy"

// Recorder holds the manager's job metrics.
type Recorder struct {
	provider      *sdkmetric.MeterProvider
	jobs          metric.Int64Counter
	podsCompleted metric.Int64Counter
	podsFailed    metric.Int64Counter
	duration      metric.Float64Histogram
	bytesFreed    metric.Int64Counter
	// regretBytes and regretReturns count what came back after removals.
	regretBytes, regretReturns metric.Int64Counter

	// The per-node totals are observed from these maps rather than added to
	// counters: a counter keeps every node it ever saw, while a node that
	// is gone must leave no series behind (ForgetNode) on clusters whose
	// nodes come and go by the thousand.
	mu         sync.Mutex
	removed    map[string]int64
	refused    map[string]int64
	vulnerable map[string]int64
	// expected and reclaimed are, per node, the bytes the removals should
	// have freed and what the image filesystem gained.
	expected  map[string]int64
	reclaimed map[string]int64
	imageFs   map[string]ImageFs
	// failedRuns counts, per node, the jobs in a row in which its worker
	// failed. It lives in memory only: a restart starts every node at 0.
	failedRuns map[string]int64
	// lastSuccess is, per trigger ("imagelist", "schedule"), when a job
	// of it last completed, in unix seconds.
	lastSuccess map[string]int64
	// coverage is the schedule's per-node record (coverage.go).
	coverage coverage
}

// NodeCounts are one node's figures in one job.
type NodeCounts struct {
	// Removed is what the remover removed.
	Removed int64
	// Refused is what the runtime would not remove for good.
	Refused int64
	// Vulnerable is what the scanner handed to the remover.
	Vulnerable int64
	// ImageFs is the image filesystem as the remover measured it; nil when
	// it did not (no disk-pressure policy).
	ImageFs *ImageFs
	// BytesFreed is the size of what the remover removed, by the policy
	// that chose each image.
	BytesFreed map[string]int64
	// ExpectedFreed is what only the removed images held, by the
	// runtime's records; Reclaimed what the image filesystem (or the
	// records) gained, where measured.
	ExpectedFreed, Reclaimed int64
	// Regret is what came back to the node after earlier removals, by the
	// policy that had removed it.
	Regret map[string]RegretCount
	// Outcome is how the node's worker ended.
	Outcome Outcome
}

// RegretCount is what came back of one policy's removals on a node.
type RegretCount struct {
	Returns, Bytes int64
}

// Outcome is how a node's worker ended in a job.
type Outcome int

const (
	// OutcomeUnknown leaves the node's run of failures as it is: the job
	// did not judge the node (it is gone, or the job never reached it).
	OutcomeUnknown Outcome = iota
	// OutcomeSucceeded ends the node's run of failures.
	OutcomeSucceeded
	// OutcomeFailed extends the node's run of failures.
	OutcomeFailed
)

// IsZero says whether the node reported nothing worth recording.
func (n NodeCounts) IsZero() bool {
	return n.Removed == 0 && n.Refused == 0 && n.Vulnerable == 0 && n.ImageFs == nil && len(n.BytesFreed) == 0 && n.ExpectedFreed == 0 && n.Reclaimed == 0 && len(n.Regret) == 0 && n.Outcome == OutcomeUnknown
}

// ImageFs is a node's image filesystem, in bytes.
type ImageFs struct {
	CapacityBytes   int64
	UsedBeforeBytes int64
	UsedAfterBytes  int64
}

// New creates the metrics. reg is where the Prometheus copies are registered
// (nil: controller-runtime's registry, served on the metrics endpoint);
// otlpEndpoint (host:port) enables the OTLP push.
func New(reg prometheus.Registerer, otlpEndpoint string) (*Recorder, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	promExporter, err := otelprom.New(otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes),
		otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{
		sdkmetric.WithReader(promExporter),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Name: "imagejob_duration_run_seconds"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
				Boundaries: []float64{0, 10, 20, 30, 40, 50, 60, 120, 300, 600, 1800, 3600},
			}},
		)),
	}
	if otlpEndpoint != "" {
		exp, err := otlpmetrichttp.New(context.Background(), otlpmetrichttp.WithEndpoint(otlpEndpoint), otlpmetrichttp.WithInsecure())
		if err != nil {
			return nil, fmt.Errorf("OTLP exporter for %s: %w", otlpEndpoint, err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	r := &Recorder{provider: sdkmetric.NewMeterProvider(opts...)}
	m := r.provider.Meter("eraser")
	if r.jobs, err = m.Int64Counter("imagejob_run_total", metric.WithDescription("Finished ImageJobs.")); err != nil {
		return nil, err
	}
	if r.podsCompleted, err = m.Int64Counter("pods_completed_run_total", metric.WithDescription("Worker pods that succeeded.")); err != nil {
		return nil, err
	}
	if r.podsFailed, err = m.Int64Counter("pods_failed_run_total", metric.WithDescription("Worker pods that failed, timed out or lost their node.")); err != nil {
		return nil, err
	}
	if r.duration, err = m.Float64Histogram("imagejob_duration_run_seconds", metric.WithUnit("s"), metric.WithDescription("Time from an ImageJob's start to its last node finishing.")); err != nil {
		return nil, err
	}
	if r.bytesFreed, err = m.Int64Counter("eraser_bytes_freed_run_total", metric.WithUnit("By"),
		metric.WithDescription("Bytes of the images removed, by the retention policy that chose them.")); err != nil {
		return nil, err
	}
	if r.regretBytes, err = m.Int64Counter("eraser_regret_bytes_total", metric.WithUnit("By"),
		metric.WithDescription("Bytes pulled back of images that came back to a node after Eraser removed them, by the retention policy that had removed them (reason).")); err != nil {
		return nil, err
	}
	if r.regretReturns, err = m.Int64Counter("eraser_regret_returns_total",
		metric.WithDescription("Images that came back to a node after Eraser removed them, by the retention policy that had removed them (reason).")); err != nil {
		return nil, err
	}
	r.removed, r.refused, r.vulnerable, r.imageFs = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]ImageFs{}
	r.expected, r.reclaimed = map[string]int64{}, map[string]int64{}
	r.failedRuns = map[string]int64{}
	r.lastSuccess = map[string]int64{}
	removed, err := m.Int64ObservableCounter("images_removed_run_total", metric.WithDescription("Images removed, per node, as the removers reported them."))
	if err != nil {
		return nil, err
	}
	refused, err := m.Int64ObservableCounter("eraser_images_refused_run_total",
		metric.WithDescription("Images the runtime would not remove for good (it refused, or answered removed and still listed them), per node; they do not fail the node."))
	if err != nil {
		return nil, err
	}
	vulnerable, err := m.Int64ObservableCounter("vulnerable_images_run_total", metric.WithDescription("Images the scanner found non-compliant and handed to the remover, per node."))
	if err != nil {
		return nil, err
	}
	expected, err := m.Int64ObservableCounter("eraser_bytes_expected_freed_run_total", metric.WithUnit("By"),
		metric.WithDescription("Bytes only the removed images held, by the runtime's records (shared layers counted once), per node."))
	if err != nil {
		return nil, err
	}
	reclaimed, err := m.Int64ObservableCounter("eraser_bytes_reclaimed_run_total", metric.WithUnit("By"),
		metric.WithDescription("Bytes the node's image filesystem gained from its runs' removals, measured before and after them, per node."))
	if err != nil {
		return nil, err
	}
	capacity, err := m.Int64ObservableGauge("eraser_imagefs_capacity_bytes", metric.WithUnit("By"),
		metric.WithDescription("Size of the node's image filesystem, at its last run that measured it."))
	if err != nil {
		return nil, err
	}
	usedBefore, err := m.Int64ObservableGauge("eraser_imagefs_used_before_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes used on the node's image filesystem before its last run that measured it removed anything."))
	if err != nil {
		return nil, err
	}
	usedAfter, err := m.Int64ObservableGauge("eraser_imagefs_used_after_bytes", metric.WithUnit("By"),
		metric.WithDescription("Bytes used on the node's image filesystem after its last run that measured it."))
	if err != nil {
		return nil, err
	}
	lastSuccess, err := m.Int64ObservableGauge("eraser_last_successful_run_timestamp_seconds", metric.WithUnit("s"),
		metric.WithDescription("When a job completed last, per trigger (imagelist, schedule), in seconds since the epoch: alert on time() minus it."))
	if err != nil {
		return nil, err
	}
	failedRuns, err := m.Int64ObservableGauge("eraser_node_consecutive_failed_runs",
		metric.WithDescription("Jobs in a row in which the node's worker failed; 0 once it succeeds. Kept in memory: 0 after a manager restart."))
	if err != nil {
		return nil, err
	}
	if _, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for trigger, at := range r.lastSuccess {
			o.ObserveInt64(lastSuccess, at, metric.WithAttributes(attribute.String(TriggerAttribute, trigger)))
		}
		for node, n := range r.removed {
			o.ObserveInt64(removed, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, n := range r.refused {
			o.ObserveInt64(refused, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, n := range r.vulnerable {
			o.ObserveInt64(vulnerable, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, n := range r.expected {
			o.ObserveInt64(expected, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, n := range r.reclaimed {
			o.ObserveInt64(reclaimed, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, n := range r.failedRuns {
			o.ObserveInt64(failedRuns, n, metric.WithAttributes(attribute.String(NodeAttribute, node)))
		}
		for node, fs := range r.imageFs {
			attrs := metric.WithAttributes(attribute.String(NodeAttribute, node))
			o.ObserveInt64(capacity, fs.CapacityBytes, attrs)
			o.ObserveInt64(usedBefore, fs.UsedBeforeBytes, attrs)
			o.ObserveInt64(usedAfter, fs.UsedAfterBytes, attrs)
		}
		return nil
	}, removed, refused, vulnerable, expected, reclaimed, capacity, usedBefore, usedAfter, lastSuccess, failedRuns); err != nil {
		return nil, err
	}
	if err := r.registerCoverage(m); err != nil {
		return nil, err
	}
	return r, nil
}

// JobFinished records one finished job; perNode maps node names to what
// their workers reported and how they ended.
func (r *Recorder) JobFinished(seconds float64, succeeded, failed int, perNode map[string]NodeCounts) {
	if r == nil {
		return
	}
	ctx := context.Background()
	r.jobs.Add(ctx, 1)
	r.podsCompleted.Add(ctx, int64(succeeded))
	r.podsFailed.Add(ctx, int64(failed))
	r.duration.Record(ctx, seconds)
	freed := map[string]int64{}
	regret := map[string]RegretCount{}
	r.mu.Lock()
	for node, n := range perNode {
		if n.Removed > 0 {
			r.removed[node] += n.Removed
		}
		if n.Refused > 0 {
			r.refused[node] += n.Refused
		}
		if n.Vulnerable > 0 {
			r.vulnerable[node] += n.Vulnerable
		}
		if n.ImageFs != nil {
			r.imageFs[node] = *n.ImageFs
		}
		if n.ExpectedFreed > 0 {
			r.expected[node] += n.ExpectedFreed
		}
		// A counter: a run whose filesystem grew meanwhile adds nothing.
		if n.Reclaimed > 0 {
			r.reclaimed[node] += n.Reclaimed
		}
		for policy, b := range n.BytesFreed {
			freed[policy] += b
		}
		for policy, c := range n.Regret {
			t := regret[policy]
			t.Returns += c.Returns
			t.Bytes += c.Bytes
			regret[policy] = t
		}
		switch n.Outcome {
		case OutcomeFailed:
			r.failedRuns[node]++
		case OutcomeSucceeded:
			// Kept at 0 rather than dropped: an alert's series should not
			// vanish and reappear with the node's luck.
			r.failedRuns[node] = 0
		}
	}
	r.mu.Unlock()
	for policy, b := range freed {
		if b > 0 {
			r.bytesFreed.Add(ctx, b, metric.WithAttributes(attribute.String(PolicyAttribute, policy)))
		}
	}
	for policy, c := range regret {
		attrs := metric.WithAttributes(attribute.String(ReasonAttribute, policy))
		if c.Returns > 0 {
			r.regretReturns.Add(ctx, c.Returns, attrs)
		}
		if c.Bytes > 0 {
			r.regretBytes.Add(ctx, c.Bytes, attrs)
		}
	}
}

// ForgetNode drops a deleted node's series.
func (r *Recorder) ForgetNode(node string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.removed, node)
	delete(r.refused, node)
	delete(r.vulnerable, node)
	delete(r.expected, node)
	delete(r.reclaimed, node)
	delete(r.imageFs, node)
	delete(r.failedRuns, node)
	delete(r.coverage.nodes, node)
}

// ReasonAttribute is the retention policy that had removed an image that
// came back (the regret metrics).
const ReasonAttribute = "reason"

// TriggerAttribute is what started a job: "imagelist" or "schedule".
const TriggerAttribute = "trigger"

// JobCompleted records that a job of trigger completed at at.
func (r *Recorder) JobCompleted(trigger string, at time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSuccess[trigger] = max(r.lastSuccess[trigger], at.Unix())
}

// ForgetLastSuccess drops trigger's gauge: the schedule's, when scheduled
// runs were turned off before any completed.
func (r *Recorder) ForgetLastSuccess(trigger string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.lastSuccess, trigger)
}

// Shutdown pushes what is pending and stops the exporters.
func (r *Recorder) Shutdown(ctx context.Context) error {
	if r == nil {
		return nil
	}
	return r.provider.Shutdown(ctx)
}
