package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	erasescheme "github.com/eraser-oss/eraser/internal/manager/scheme"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// ReasonInvalidConfig is the Event reason on the EraserConfig ConfigMap of a
// manager held back by it.
const ReasonInvalidConfig = "InvalidConfig"

// configRecheckInterval is how often a held-back manager reads its
// ConfigMap again.
var configRecheckInterval = 10 * time.Second

// RunInvalidConfig runs a manager whose EraserConfig is invalid and that has
// no good one to fall back on (LoadLastGood): instead of exiting into a
// crash loop, it runs no controller, so removes nothing; it stays live and
// fails readiness with the error (the rollout stops there, and the pod's
// Ready condition says why), files a Warning Event on the ConfigMap, and
// reads the ConfigMap again until its document is valid. Then it returns
// nil, and the process exits to be restarted with it.
func RunInvalidConfig(ctx context.Context, log logr.Logger, restConfig *rest.Config, opts Options, loadErr error) error {
	scheme, err := erasescheme.New()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.ProbeAddr,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	reader, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	g := &configGate{log: log, reader: reader, recorder: mgr.GetEventRecorderFor("eraser-manager"),
		key: client.ObjectKey{Namespace: opts.Namespace, Name: opts.ConfigMapName}, err: loadErr}
	g.report(ctx)
	if err := runHeldBack(ctx, mgr, g); err != nil && !errors.Is(err, errConfigFixed) {
		return err
	}
	return nil
}

var errConfigFixed = errors.New("the EraserConfig ConfigMap now holds a valid document")

// configGate holds back a manager whose configuration is invalid.
type configGate struct {
	log      logr.Logger
	reader   client.Reader
	recorder record.EventRecorder
	key      client.ObjectKey

	mu  sync.Mutex
	err error
}

// message says what is wrong and what to do.
func (g *configGate) message() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("no job runs and nothing is removed: %v; fix ConfigMap %s/%s (kubectl eraser config check -f FILE checks a document first)",
		g.err, g.key.Namespace, g.key.Name)
}

// report logs the error and files it on the ConfigMap.
func (g *configGate) report(ctx context.Context) {
	msg := g.message()
	g.log.Error(nil, msg, "configMap", g.key.String())
	cm := &corev1.ConfigMap{}
	if err := g.reader.Get(ctx, g.key, cm); err == nil {
		g.recorder.Event(cm, corev1.EventTypeWarning, ReasonInvalidConfig, msg)
	}
}

// Ready fails with the message while the gate holds the manager back.
func (g *configGate) Ready(*http.Request) error { return errors.New(g.message()) }

// Start reads the ConfigMap every configRecheckInterval and returns
// errConfigFixed once its document is valid; a different error is
// reported again.
func (g *configGate) Start(ctx context.Context) error {
	t := time.NewTicker(configRecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cm := &corev1.ConfigMap{}
		if err := g.reader.Get(ctx, g.key, cm); err != nil {
			g.log.V(1).Info("reading the EraserConfig ConfigMap again", "error", err.Error())
			continue
		}
		_, _, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
		if err == nil {
			g.log.Info(errConfigFixed.Error() + "; exiting, so that the restarted manager runs with it")
			return errConfigFixed
		}
		g.mu.Lock()
		changed := err.Error() != g.err.Error()
		g.err = err
		g.mu.Unlock()
		if changed {
			g.report(ctx)
		}
	}
}

// NeedLeaderElection is false: every replica is held back, and says so.
func (g *configGate) NeedLeaderElection() bool { return false }

// Name is the readiness check's.
func (g *configGate) Name() string { return "config-invalid" }
