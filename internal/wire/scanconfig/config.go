// Package scanconfig reads the Trivy scanner's configuration (the
// components.scanner.config string of the EraserConfig): the manager checks
// it and picks the run's DB from it, the scanner runs by it.
package scanconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/util/strictkeys"
)

// Config is the Trivy scanner's configuration: the components.scanner.config
// string of the EraserConfig, with upstream's keys.
type Config struct {
	CacheDir string `json:"cacheDir"`
	DBRepo   string `json:"dbRepo"`
	// SkipDBUpdate (our addition) never downloads: the DB must already be
	// in cacheDir/db, pre-seeded on the node (air-gapped clusters).
	SkipDBUpdate bool `json:"skipDBUpdate"`
	// DeleteFailedImages defaults to false here; upstream removed images it
	// failed to scan unless told otherwise.
	DeleteFailedImages bool `json:"deleteFailedImages"`
	// DeleteEOLImages: upstream's default (true) is kept.
	DeleteEOLImages bool          `json:"deleteEOLImages"`
	Vulnerabilities Vulnerability `json:"vulnerabilities"`
	Timeout         Timeouts      `json:"timeout"`
	// DBDownloadTimeout (our addition) bounds the DB download: a registry
	// that accepts the connection and never answers would otherwise hold
	// the node's run until the pod's run timeout, and end it with no word
	// about why.
	DBDownloadTimeout duration `json:"dbDownloadTimeout"`
}

// Vulnerability selects the findings that count.
type Vulnerability struct {
	IgnoreUnfixed   bool     `json:"ignoreUnfixed"`
	Types           []string `json:"types"`
	SecurityChecks  []string `json:"securityChecks"`
	Severities      []string `json:"severities"`
	IgnoredStatuses []string `json:"ignoredStatuses"`
}

// Timeouts bound the scan.
type Timeouts struct {
	Total    duration `json:"total"`
	PerImage duration `json:"perImage"`
}

type duration struct{ time.Duration }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"1h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as \"1h\"", s)
	}
	d.Duration = v
	return nil
}

// DefaultDBDownloadTimeout is long enough for the DB (tens of MB compressed)
// on a slow link, and short against the 24h a worker pod may run.
const DefaultDBDownloadTimeout = 10 * time.Minute

// DefaultConfig is upstream's defaults, but keeping images whose scan failed.
func DefaultConfig() Config {
	return Config{
		CacheDir:        "/var/lib/trivy",
		DBRepo:          "ghcr.io/aquasecurity/trivy-db",
		DeleteEOLImages: true,
		Vulnerabilities: Vulnerability{
			Types:          []string{"os", "library"},
			SecurityChecks: []string{"vuln"},
			Severities:     []string{"CRITICAL", "HIGH", "MEDIUM", "LOW"},
		},
		Timeout:           Timeouts{Total: duration{23 * time.Hour}, PerImage: duration{time.Hour}},
		DBDownloadTimeout: duration{DefaultDBDownloadTimeout},
	}
}

// ParseConfig applies a components.scanner.config document onto the
// defaults; an empty document gives the defaults. Its warnings are dropped:
// Parse returns them.
func ParseConfig(doc string) (Config, error) {
	cfg, _, err := Parse(doc)
	if err != nil {
		return Config{}, fmt.Errorf("components.scanner.config: %w", err)
	}
	return cfg, nil
}

// Parse applies a components.scanner.config document onto the defaults. It
// returns warnings about keys that have no effect (see checkKeys) and an
// error for a value the scanner cannot run with; the caller names the
// document.
func Parse(doc string) (Config, []string, error) {
	cfg := DefaultConfig()
	if doc == "" {
		return cfg, nil, nil
	}
	// A repeated key (or one re-cased: encoding/json matches any case)
	// would keep only its last value, silently.
	if err := strictkeys.YAML([]byte(doc)); err != nil {
		return Config{}, nil, err
	}
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return Config{}, nil, err
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return Config{}, nil, err
	}
	top, ok := generic.(map[string]any)
	if !ok && generic != nil {
		return Config{}, nil, errors.New("must be a YAML mapping of the scanner's keys, such as cacheDir and vulnerabilities")
	}
	warnings, err := checkKeys(top)
	if err != nil {
		return Config{}, nil, err
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return Config{}, nil, err
	}
	if err := cfg.validate(); err != nil {
		return Config{}, nil, err
	}
	return cfg, warnings, nil
}

func (cfg *Config) validate() error {
	if cfg.Vulnerabilities.Severities == nil {
		cfg.Vulnerabilities.Severities = DefaultConfig().Vulnerabilities.Severities
	}
	if cfg.CacheDir == "" {
		return errors.New("cacheDir must not be empty")
	}
	if cfg.DBRepo == "" && !cfg.SkipDBUpdate {
		return errors.New("dbRepo is empty and skipDBUpdate is off: there is nowhere to get the vulnerability DB from")
	}
	if cfg.DBDownloadTimeout.Duration <= 0 {
		return fmt.Errorf("dbDownloadTimeout: must be greater than zero, got %v", cfg.DBDownloadTimeout.Duration)
	}
	for _, t := range cfg.Vulnerabilities.Types {
		if t != "os" && t != "library" {
			return fmt.Errorf("vulnerabilities.types: %q is neither \"os\" nor \"library\"", t)
		}
	}
	return nil
}
