// Package manager assembles the Eraser controller manager: configuration,
// scheme, cache, health probes, metrics and leader election.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	erasescheme "github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/holdback"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Leader election reads, creates and renews one Lease in the manager's
// namespace (client-go's LeaseLock calls nothing else); its events go
// through the same core/v1 recorder as the controllers', whose cluster-wide
// events rule covers them.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=eraser-system,resources=leases,verbs=get;create;update

// EventSource is the component the manager's Events are from.
const EventSource = "eraser-manager"

// Run runs the manager until ctx is cancelled, or until what holds it back
// (package holdback) is gone: it then returns nil, for the process to exit
// and be restarted with its controllers.
func Run(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, store *eraserconfig.Store) error {
	cfg, _, _ := store.Get()
	log.Info("starting", "version", version.Version, "commit", version.Commit, "namespace", opts.Namespace,
		"configVersion", cfg.APIVersion, "collector", cfg.Components.Collector.Enabled, "scanner", cfg.Components.Scanner.Enabled)

	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = version.UserAgent("manager")
	// Uncompressed responses: gzipping every watch event and list of
	// thousands of pods costs the API server more CPU than the bytes cost
	// the cluster network, and the API server is what a run waits on.
	restConfig.DisableCompression = true
	reader, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}

	// Before anything writes: a CRD that lacks fields would drop them from
	// every write without an error (and a user's spec.dryRun with them).
	cause, err := holdback.Find(ctx, log, reader, opts.configMap())
	if err != nil {
		return fmt.Errorf("checking what holds the manager back: %w", err)
	}
	if cause != nil {
		return holdback.Run(ctx, log, restConfig, heldBackOptions(scheme, opts, holdback.RecheckEvery), cause)
	}
	// Before any ImageList is looked at, and before any ImageJob is
	// created: an install whose manifest did not date it is dated now, and
	// what was there before it is recorded (package adoption).
	if _, err := adoption.Survey(ctx, reader, opts.Namespace); err != nil {
		return fmt.Errorf("dating the install: %w", err)
	}
	cacheOpts, stores := cacheopts.Options(opts.Namespace)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: opts.Namespace,
		LeaseDuration:           nonZero(opts.LeaseDuration),
		RenewDeadline:           nonZero(opts.RenewDeadline),
		RetryPeriod:             nonZero(opts.RetryPeriod),
		// Hand the lease over at once on a clean shutdown, so a rolling update
		// does not leave jobs unattended for a whole lease duration.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := setupControllers(mgr, stores, opts, store); err != nil {
		return err
	}
	if err := addProbes(mgr); err != nil {
		return fmt.Errorf("adding the health probes: %w", err)
	}
	return mgr.Start(ctx)
}

// RunInvalidConfig runs a manager whose EraserConfig (loadErr) is invalid
// and that has no good one to fall back on (eraserconfig.LoadLastGood),
// held back until the ConfigMap's document is valid: then it returns nil,
// and the process exits to be restarted with it.
func RunInvalidConfig(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, loadErr error) error {
	scheme, err := newScheme()
	if err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	reader, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	cause := eraserconfig.NewInvalid(log, reader, opts.configMap(), config.ConfigKey, loadErr)
	return holdback.Run(ctx, log, restConfig, heldBackOptions(scheme, opts, eraserconfig.RecheckEvery), cause)
}

// newScheme is the manager's scheme, with the CRDs' kind for reading them
// and filing Events on them.
func newScheme() (*runtime.Scheme, error) {
	scheme, err := erasescheme.New()
	if err != nil {
		return nil, err
	}
	return scheme, apiextensionsv1.AddToScheme(scheme)
}

func heldBackOptions(scheme *runtime.Scheme, opts Options, every time.Duration) holdback.Options {
	return holdback.Options{Scheme: scheme, MetricsAddr: opts.MetricsAddr, ProbeAddr: opts.ProbeAddr, PprofAddr: opts.PprofAddr,
		EventSource: EventSource, Every: every}
}

// addProbes adds the liveness and readiness checks.
func addProbes(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("cache", cacheSynced(mgr.GetCache()))
}

// nonZero leaves a timing unset (controller-runtime's default) when the
// Options were not filled from flags.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}

// cacheSynced reports ready once the informers have synced, so that a
// replica does not take traffic, or a rollout proceed, on an empty cache.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	}
}
