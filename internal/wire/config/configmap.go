package config

// The ConfigMap that carries the EraserConfig document, as the chart and
// the manifest create it, and as the job ConfigMaps repeat it for the
// worker pods.
const (
	// ConfigMapName is the ConfigMap's default name; the manager reads
	// another one when ERASER_CONFIGMAP_NAME says so.
	ConfigMapName = "eraser-manager-config"
	// ConfigKey is the data key that holds the document.
	ConfigKey = "controller_manager_config.yaml"
)
