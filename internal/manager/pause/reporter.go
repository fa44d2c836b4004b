package pause

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pauseswitch "github.com/eraser-oss/eraser/internal/wire/pause"
)

// paused is the switch as the manager last read it: a plain Prometheus
// gauge, the manager's own state, as the reload gauge is.
var paused = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "eraser_paused",
	Help: "1 while Eraser is paused (ConfigMap eraser-pause exists): no run or wave starts; 0 otherwise.",
})

func init() {
	ctrlmetrics.Registry.MustRegister(paused)
}

// Reporter keeps the gauge and the log in step with the switch. The runs
// read the switch themselves, each when it would start something.
type Reporter struct {
	client    client.Client
	namespace string
	last      *bool
}

// NewReporter reports the switch in namespace.
func NewReporter(c client.Client, namespace string) *Reporter {
	return &Reporter{client: c, namespace: namespace}
}

// SetupWithManager watches the switch's ConfigMap (in the manager's cache
// with the namespace's others).
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("pause").
		For(&corev1.ConfigMap{}, builder.WithPredicates(Switch(r.namespace))).
		Complete(r)
}

// Reconcile sets the gauge, and logs each change.
func (r *Reporter) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	s, err := Read(ctx, r.client, r.namespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	if s.Paused {
		paused.Set(1)
	} else {
		paused.Set(0)
	}
	if r.last == nil || *r.last != s.Paused {
		if s.Paused {
			log.FromContext(ctx).Info("paused: no run or wave starts until the switch is deleted", "configMap", pauseswitch.Name, "since", s.Since, "by", s.By, "reason", s.Reason)
		} else if r.last != nil {
			log.FromContext(ctx).Info("resumed", "configMap", pauseswitch.Name)
		}
		r.last = &s.Paused
	}
	return reconcile.Result{}, nil
}
