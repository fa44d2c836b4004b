// Command manager runs the Eraser controller manager; "manager check" checks
// a release of it, as the chart's helm test does.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/releasecheck"
	"github.com/eraser-oss/eraser/internal/process/memlimit"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the informer caches, which churn with every pod
		// update on big clusters; collecting at +30% instead of +100% keeps
		// the peak ~25% lower at 5,000 nodes, for CPU the manager has spare.
		debug.SetGCPercent(30)
	}
	memlimit.Apply()
	if len(os.Args) > 1 && os.Args[1] == "check" {
		// What the chart's helm test runs (package releasecheck).
		os.Exit(releasecheck.Main(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdout))
	}
	var opts manager.Options
	opts.Bind(flag.CommandLine) // controller-runtime has registered --kubeconfig here
	flag.Parse()
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		flag.Usage()
		os.Exit(2)
	}
	opts.FromEnv()

	log := manager.NewLogger(opts.LogLevel, os.Stderr)
	if err := run(log, opts); err != nil {
		log.Error(err, "manager exited")
		os.Exit(1)
	}
}

// run runs the manager's steps: the configuration loaded, the API server
// found, the configuration fallen back on if the file's is invalid, then
// the manager run (or held back).
func run(log logr.Logger, opts manager.Options) error {
	// The configuration is checked before anything else, so that a bad
	// ConfigMap fails the rollout with the field at fault in the log and in
	// the readiness, unless a good one is on record (see LoadLastGood).
	store, loadErr := eraserconfig.Load(log, opts.ConfigSource())
	if loadErr != nil && !errors.Is(loadErr, eraserconfig.ErrInvalid) {
		return fmt.Errorf("loading the EraserConfig: %w", loadErr)
	}
	ctx := ctrl.SetupSignalHandler()
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the API server: %w", errors.Join(loadErr, err))
	}
	opts.BoundClients(restConfig)
	if loadErr != nil {
		// Refused by hot reload earlier, perhaps: the last good one may be
		// on record.
		if store, err = eraserconfig.LoadLastGood(ctx, log, restConfig, opts.ConfigSource(), loadErr); err != nil {
			// Nothing to run with: held back, live and unready, until the
			// ConfigMap is fixed, rather than a crash loop.
			if err := manager.RunInvalidConfig(ctx, log, restConfig, opts, loadErr); err != nil {
				return fmt.Errorf("running held back by the EraserConfig: %w", err)
			}
			return nil
		}
	}
	if err := manager.Run(ctx, log, restConfig, opts, store); err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	return nil
}
