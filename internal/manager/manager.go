// Package manager assembles the Eraser controller manager: configuration,
// scheme, cache, health probes, metrics and leader election.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/configstore"
	"github.com/eraser-oss/eraser/internal/manager/migration"
	erasescheme "github.com/eraser-oss/eraser/internal/manager/scheme"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Leader election reads, creates and renews one Lease in the manager's
// namespace (client-go's LeaseLock calls nothing else); its events go
// through the same core/v1 recorder as the controllers', whose cluster-wide
// events rule covers them.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=eraser-system,resources=leases,verbs=get;create;update

// LoadConfig reads and validates the EraserConfig file, applying
// --remover-image. Warnings are logged; an invalid file is an error naming
// every bad field.
func LoadConfig(log logr.Logger, path, removerImage string) (*configstore.Store, error) {
	if path == "" {
		return nil, errors.New("--config is required: the path of the mounted EraserConfig")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading EraserConfig: %w", err)
	}
	cfg, warnings, err := config.Parse(data)
	for _, w := range warnings {
		log.Info("EraserConfig warning", "file", path, "warning", w)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidConfig, path, err)
	}
	return withRemoverImage(cfg, data, removerImage)
}

// ErrInvalidConfig is a mounted EraserConfig that does not parse or validate.
var ErrInvalidConfig = errors.New("invalid EraserConfig")

func withRemoverImage(cfg *config.Config, data []byte, removerImage string) (*configstore.Store, error) {
	if removerImage != "" {
		img, err := config.ParseImage(removerImage)
		if err != nil {
			return nil, fmt.Errorf("--remover-image: %w", err)
		}
		cfg.Components.Remover.Image = img
	}
	return configstore.New(cfg, data), nil
}

// LoadLastGood is the start-up fallback for a mounted EraserConfig that is
// invalid (loadErr): a document that hot reload refused is still in the
// ConfigMap, so a restart would crash-loop on it. If the cluster has a last
// good document on record, the manager starts with that and says so; with
// none it still refuses to start.
func LoadLastGood(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, loadErr error) (*configstore.Store, error) {
	c, err := client.New(restConfig, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("%w (and no client to read the last good one: %w)", loadErr, err)
	}
	key := client.ObjectKey{Namespace: opts.Namespace, Name: opts.ConfigMapName}
	raw, err := configstore.Recorded(ctx, c, key, config.ConfigKey)
	if err != nil {
		// The mounted file lags the ConfigMap by up to a minute: a document
		// fixed there is what the file is about to hold.
		live := &corev1.ConfigMap{}
		if gerr := c.Get(ctx, key, live); gerr == nil {
			if cfg, _, perr := config.Parse([]byte(live.Data[config.ConfigKey])); perr == nil {
				log.Info("the mounted EraserConfig is invalid and its ConfigMap's is valid: starting with the ConfigMap's, which the file will hold soon", "configMap", key.String())
				return withRemoverImage(cfg, []byte(live.Data[config.ConfigKey]), opts.RemoverImage)
			}
		}
		return nil, fmt.Errorf("%w (and no last good one on record: %w)", loadErr, err)
	}
	cfg, _, err := config.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w (and the last good one on record no longer parses: %w)", loadErr, err)
	}
	log.Error(loadErr, "the mounted EraserConfig is invalid; starting with the last good configuration on record, until the ConfigMap is fixed",
		"record", configstore.RecordKey(key).Name)
	return withRemoverImage(cfg, raw, opts.RemoverImage)
}

// Run runs the manager until ctx is cancelled.
func Run(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, store *configstore.Store) error {
	cfg, _, _ := store.Get()
	log.Info("starting", "version", version.Version, "commit", version.Commit, "namespace", opts.Namespace,
		"configVersion", cfg.APIVersion, "collector", cfg.Components.Collector.Enabled, "scanner", cfg.Components.Scanner.Enabled)

	scheme, err := erasescheme.New()
	if err == nil {
		// For reading the CRDs, and filing Events on them.
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err != nil {
		return err
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = version.UserAgent("manager")
	// Uncompressed responses: gzipping every watch event and list of
	// thousands of pods costs the API server more CPU than the bytes cost
	// the cluster network, and the API server is what a run waits on.
	restConfig.DisableCompression = true

	// Before anything writes: a CRD that lacks fields would drop them from
	// every write without an error (and a user's spec.dryRun with them).
	reader, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	findings, err := readCRDs(ctx, log, reader)
	if err != nil {
		return err
	}
	var others []migration.Manager
	if len(findings) == 0 {
		others = readOtherManagers(ctx, log, reader, opts.Namespace)
	}
	heldBack := len(findings) > 0 || len(others) > 0
	if !heldBack {
		// Before any ImageList is looked at: an install whose manifest did
		// not date it is dated now (package adoption).
		if _, err := adoption.Since(ctx, reader, opts.Namespace); err != nil {
			return err
		}
	}

	cacheOpts, stores := cacheopts.Options(opts.Namespace)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
		PprofBindAddress:       opts.PprofAddr,
		// A manager held back runs nothing, so takes no lease from one that
		// might run.
		LeaderElection:          opts.LeaderElect && !heldBack,
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
	if len(findings) > 0 {
		err := runHeldBack(ctx, mgr, newCRDGate(log, reader, mgr.GetEventRecorderFor("eraser-manager"), opts.Namespace, findings))
		if errors.Is(err, errCRDsFixed) {
			return nil
		}
		return err
	}
	if len(others) > 0 {
		key := client.ObjectKey{Namespace: opts.Namespace, Name: opts.ConfigMapName}
		err := runHeldBack(ctx, mgr, newManagerGate(ctx, log, reader, mgr.GetEventRecorderFor("eraser-manager"), key, others))
		if errors.Is(err, errOthersGone) {
			return nil
		}
		return err
	}
	if err := setupControllers(mgr, stores, opts, store); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// gate is what holds a manager back from running its controllers: it
// fails readiness with its reason, and its Start returns once the cause is
// gone.
type gate interface {
	// Name is the readiness check's, which /readyz?verbose shows (the
	// reason itself is withheld there; the log and the Events have it).
	Name() string
	Ready(*http.Request) error
	Start(context.Context) error
	NeedLeaderElection() bool
}

// runHeldBack runs a manager with no controllers, unready with the gate's
// message, until the gate's Start returns (its error says why); the
// process then exits to be restarted with its controllers.
func runHeldBack(ctx context.Context, mgr ctrl.Manager, g gate) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck(g.Name(), g.Ready); err != nil {
		return err
	}
	if err := mgr.Add(g); err != nil {
		return err
	}
	return mgr.Start(ctx)
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
