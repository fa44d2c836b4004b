package manager

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/imagejob"
	"github.com/eraser-oss/eraser/internal/manager/imagelist"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/reportwriter"
	"github.com/eraser-oss/eraser/internal/manager/scanservice"
	"github.com/eraser-oss/eraser/internal/manager/schedule"
	"github.com/eraser-oss/eraser/internal/manager/workloadindex"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// setupControllers registers every controller with its dependencies.
// The stores are those of the manager's cache.
func setupControllers(mgr ctrl.Manager, stores *cacheopts.Stores, opts Options, store *eraserconfig.Store) error {
	clk := clock.RealClock{}
	cfg, _, _ := store.Get()
	// The OTLP endpoint is read once: exporters are not swapped at run time.
	rec, err := metrics.New(nil, cfg.Manager.OTLPEndpoint)
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorderFor(EventSource)
	// The images the cluster's pods and templates reference: watched
	// cluster-wide apart from the manager's cache, which holds only its
	// namespace's pods, and kept compact (internal/manager/workloadindex).
	// Off (--reference-index=false), nothing reads them, so the
	// ClusterRole may leave their read rules out; an interface left nil,
	// not a nil index, so that a run that needs it says it is missing.
	var refs imagejob.References
	if !opts.NoReferenceIndex {
		idx, err := workloadindex.New(mgr.GetConfig())
		if err != nil {
			return err
		}
		if err := mgr.Add(idx); err != nil {
			return fmt.Errorf("adding the reference index: %w", err)
		}
		refs = idx
	}
	scanOpts, err := opts.scanService()
	if err != nil {
		return err
	}
	scans, err := scanservice.New(mgr.GetLogger(), scanOpts)
	if err != nil {
		return fmt.Errorf("preparing the scan service: %w", err)
	}
	setups := []struct {
		name  string
		setup func() error
	}{
		{"config", func() error {
			return eraserconfig.NewReloader(mgr.GetClient(), recorder, store, opts.configMap(), config.ConfigKey, opts.RemoverImage).SetupWithManager(mgr)
		}},
		{"imagejob", func() error {
			return imagejob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), stores, recorder, clk, rec,
				imagejob.Options{Namespace: opts.Namespace, LogLevel: string(opts.LogLevel), PullSecrets: opts.PullSecrets,
					References: refs, ScanService: opts.ScanServiceURL(), ScanDBs: scans.DBs(), Config: store}).SetupWithManager(mgr)
		}},
		{"scan service", func() error { return scans.Setup(mgr) }},
		{"jobreport", func() error {
			cs, err := kubernetes.NewForConfig(mgr.GetConfig())
			if err != nil {
				return err
			}
			return reportwriter.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), reportwriter.PodLogs{Client: cs}, clk,
				reportwriter.Options{Namespace: opts.Namespace}).SetupWithManager(mgr)
		}},
		{"imagelist", func() error {
			return imagelist.NewReconciler(mgr.GetClient(), recorder, clk, store, opts.Namespace, opts.RemoverImage).SetupWithManager(mgr)
		}},
		{"pause", func() error {
			return pause.NewReporter(mgr.GetClient(), opts.Namespace).SetupWithManager(mgr)
		}},
		{"schedule", func() error {
			return schedule.NewReconciler(mgr.GetClient(), recorder, clk, store, rec, opts.Namespace, opts.RemoverImage).SetupWithManager(mgr)
		}},
	}
	for _, s := range setups {
		if err := s.setup(); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", s.name, err)
		}
	}
	return nil
}
