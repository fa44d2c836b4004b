package manager

import (
	"flag"
	"os"

	"github.com/eraser-oss/eraser/internal/logging"
)

// Defaults shared with the manifests and the Helm chart.
const (
	DefaultNamespace     = "eraser-system"
	DefaultConfigMapName = "eraser-manager-config"
	// ConfigKey is the key of the EraserConfig document in its ConfigMap.
	ConfigKey = "controller_manager_config.yaml"
	// LeaderElectionID names the Lease the replicas compete for.
	LeaderElectionID = "eraser-manager.eraser.sh"
)

// Options are the manager's flags and environment.
type Options struct {
	// ConfigFile is the mounted EraserConfig (--config, required as upstream).
	ConfigFile string
	LogLevel   logging.Level
	// RemoverImage overrides components.remover.image (--remover-image).
	RemoverImage string

	MetricsAddr string
	ProbeAddr   string
	LeaderElect bool

	// Namespace holds the manager's pods, PodTemplates and ConfigMaps
	// (POD_NAMESPACE, as upstream).
	Namespace string
	// ConfigMapName names the EraserConfig ConfigMap (ERASER_CONFIGMAP_NAME).
	ConfigMapName string
}

// Bind registers the manager's flags, upstream's first.
func (o *Options) Bind(fs *flag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", "", "path to the EraserConfig file (the mounted eraser-manager-config ConfigMap)")
	o.LogLevel.Bind(fs)
	fs.StringVar(&o.RemoverImage, "remover-image", "", "remover image reference; overrides components.remover.image")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8889", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader so that only one replica runs jobs")
}

// FromEnv fills what upstream Eraser reads from the environment.
func (o *Options) FromEnv() {
	o.Namespace = envOr("POD_NAMESPACE", DefaultNamespace)
	o.ConfigMapName = envOr("ERASER_CONFIGMAP_NAME", DefaultConfigMapName)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
