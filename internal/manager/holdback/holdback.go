// Package holdback runs a manager that must not run its controllers yet:
// the installed CRDs would drop fields it writes, another Eraser manager
// acts on the same CRDs, or its configuration is invalid with none to fall
// back on. A manager held back removes nothing and takes no lease; it stays
// live, fails readiness with what is wrong and what to do, files Warning
// Events, and looks again until the cause is gone, then exits to be
// restarted with its controllers.
package holdback

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Cause is what holds a manager back. Its methods are called from the
// readiness check and the loop that looks again, concurrently.
type Cause interface {
	// Name is the readiness check's, which /readyz?verbose shows (the
	// message itself is withheld there; the log and the Events have it).
	Name() string
	// Message says what is wrong and what to do.
	Message() string
	// Report says it: a log line at error, and Warning Events on the
	// objects to change.
	Report(ctx context.Context, events record.EventRecorder)
	// Recheck looks again: gone once the cause is (it has said why the
	// manager exits), changed when what Report says would differ; an
	// error when it could not look.
	Recheck(ctx context.Context) (gone, changed bool, err error)
}

// RecheckEvery is how often a manager held back by its CRDs or by another
// manager looks again.
const RecheckEvery = 30 * time.Second

// Options are the held-back manager's.
type Options struct {
	Scheme *runtime.Scheme
	// MetricsAddr, ProbeAddr and PprofAddr are the manager's endpoints.
	MetricsAddr, ProbeAddr, PprofAddr string
	// EventSource is the component its Events are from.
	EventSource string
	// Every is how often the cause is looked at again.
	Every time.Duration
}

// errGone ends the held-back manager.
var errGone = errors.New("nothing holds the manager back any more")

// Run runs a manager with no controllers and no leader election, unready
// with the cause's message, until the cause is gone (nil: the process
// exits, to be restarted with its controllers) or ctx ends.
func Run(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, cause Cause) error {
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 opts.Scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
		PprofBindAddress:       opts.PprofAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the held-back manager: %w", err)
	}
	events := mgr.GetEventRecorderFor(opts.EventSource)
	cause.Report(ctx, events)
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck(cause.Name(), func(*http.Request) error { return errors.New(cause.Message()) }); err != nil {
		return err
	}
	if err := mgr.Add(&watch{log: log, cause: cause, events: events, every: opts.Every}); err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, errGone) {
		return err
	}
	return nil
}

// watch looks at the cause again every so often, reports it again when it
// changed, and ends the manager once it is gone.
type watch struct {
	log    logr.Logger
	cause  Cause
	events record.EventRecorder
	every  time.Duration
}

func (w *watch) Start(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		gone, changed, err := w.cause.Recheck(ctx)
		switch {
		case err != nil:
			w.log.V(1).Info("looking again at what holds the manager back", "check", w.cause.Name(), "error", err.Error())
		case gone:
			return errGone
		case changed:
			w.cause.Report(ctx, w.events)
		}
	}
}

// NeedLeaderElection is false: every replica is held back, and says so.
func (w *watch) NeedLeaderElection() bool { return false }

// Find says what holds the manager back, if anything (nil): CRDs that
// would drop fields it writes, then other managers acting on them, whose
// Events go on the EraserConfig ConfigMap at configMap.
func Find(ctx context.Context, log logr.Logger, r client.Reader, configMap client.ObjectKey) (Cause, error) {
	findings, err := readCRDs(ctx, log, r)
	if err != nil {
		return nil, err
	}
	if len(findings) > 0 {
		return &crds{log: log, reader: r, namespace: configMap.Namespace, findings: findings}, nil
	}
	if others := readOtherManagers(ctx, log, r, configMap.Namespace); len(others) > 0 {
		return &otherManagers{log: log, reader: r, key: configMap, others: others}, nil
	}
	return nil, nil
}
