package eraserconfig

import (
	"bytes"
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Reloader reloads the configuration.
type Reloader struct {
	client       client.Client
	recorder     record.EventRecorder
	store        *Store
	key          client.ObjectKey
	dataKey      string
	removerImage string
}

var _ reconcile.Reconciler = (*Reloader)(nil)

// NewReloader watches the ConfigMap at key, reading its dataKey.
func NewReloader(c client.Client, recorder record.EventRecorder, store *Store, key client.ObjectKey, dataKey, removerImage string) *Reloader {
	return &Reloader{client: c, recorder: recorder, store: store, key: key, dataKey: dataKey, removerImage: removerImage}
}

// reloadSuccessful is 0 while the ConfigMap holds a document that was
// refused (the last good one stays in force), 1 otherwise: something to
// alert on, since nothing else fails when an edit is refused.
var reloadSuccessful = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "eraser_config_last_reload_successful",
	Help: "1 when the EraserConfig ConfigMap's document is in force, 0 when it was refused and the last good one is.",
})

// SetupWithManager watches the one ConfigMap and its last good record: a
// record deleted (by the garbage collector, say) is written again.
func (r *Reloader) SetupWithManager(mgr ctrl.Manager) error {
	if err := ctrlmetrics.Registry.Register(reloadSuccessful); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("config").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.key.Namespace &&
				(o.GetName() == r.key.Name || o.GetName() == RecordKey(r.key).Name)
		}))).
		Complete(r)
}

// The last good configuration is recorded in a ConfigMap of its own
// (Record), created and updated here.
// +kubebuilder:rbac:groups="",namespace=eraser-system,resources=configmaps,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile applies the ConfigMap's document if it is new and valid.
func (r *Reloader) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, r.key, cm); err != nil {
		// Deleted: keep the last good configuration.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	raw := []byte(cm.Data[r.dataKey])
	if _, current, _ := r.store.Get(); bytes.Equal(raw, current) {
		// In force (from the start, or applied earlier): make sure a
		// restart can fall back to it.
		reloadSuccessful.Set(1)
		return reconcile.Result{}, Record(ctx, r.client, cm, r.dataKey, raw)
	}
	cfg, warnings, err := config.Parse(raw)
	for _, w := range warnings {
		logger.Info("EraserConfig warning", "warning", w)
	}
	if err == nil {
		err = ApplyRemoverImage(cfg, r.removerImage)
	}
	if err != nil {
		// Not retried: only a new edit can fix the document.
		logger.Error(err, "invalid EraserConfig refused; the previous configuration stays in force")
		r.recorder.Eventf(cm, corev1.EventTypeWarning, eraserv1.ReasonInvalidConfig, "refused, previous configuration kept: %v", err)
		reloadSuccessful.Set(0)
		// The record stays as it was, but owned by this ConfigMap: one
		// re-created with a refused document must not have the garbage
		// collector take the fallback away.
		return reconcile.Result{}, Adopt(ctx, r.client, cm)
	}
	r.store.Set(cfg, raw)
	reloadSuccessful.Set(1)
	if err := Record(ctx, r.client, cm, r.dataKey, raw); err != nil {
		return reconcile.Result{}, err
	}
	logger.Info("EraserConfig applied", "apiVersion", cfg.APIVersion, "collector", cfg.Components.Collector.Enabled, "scanner", cfg.Components.Scanner.Enabled)
	r.recorder.Eventf(cm, corev1.EventTypeNormal, eraserv1.ReasonConfigApplied, "applies to the next jobs (collector enabled: %v, scanner enabled: %v)",
		cfg.Components.Collector.Enabled, cfg.Components.Scanner.Enabled)
	return reconcile.Result{}, nil
}
