package scan

import (
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/yaml"
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
// defaults; an empty document gives the defaults.
func ParseConfig(doc string) (Config, error) {
	cfg := DefaultConfig()
	if doc == "" {
		return cfg, nil
	}
	if err := yaml.UnmarshalStrict([]byte(doc), &cfg); err != nil {
		return Config{}, fmt.Errorf("components.scanner.config: %w", err)
	}
	if cfg.Vulnerabilities.Severities == nil {
		cfg.Vulnerabilities.Severities = DefaultConfig().Vulnerabilities.Severities
	}
	if cfg.CacheDir == "" {
		return Config{}, errors.New("components.scanner.config: cacheDir must not be empty")
	}
	if cfg.DBRepo == "" && !cfg.SkipDBUpdate {
		return Config{}, errors.New("components.scanner.config: dbRepo is empty and skipDBUpdate is off: there is nowhere to get the vulnerability DB from")
	}
	if cfg.DBDownloadTimeout.Duration <= 0 {
		return Config{}, fmt.Errorf("components.scanner.config: dbDownloadTimeout: must be greater than zero, got %v", cfg.DBDownloadTimeout.Duration)
	}
	for _, t := range cfg.Vulnerabilities.Types {
		if t != "os" && t != "library" {
			return Config{}, fmt.Errorf("components.scanner.config: vulnerabilities.types: %q is neither \"os\" nor \"library\"", t)
		}
	}
	return cfg, nil
}

// Policy is the judgement part of the configuration.
func (c Config) Policy() Policy {
	return Policy{
		Severities: c.Vulnerabilities.Severities, IgnoreUnfixed: c.Vulnerabilities.IgnoreUnfixed,
		Types: c.Vulnerabilities.Types, IgnoredStatuses: c.Vulnerabilities.IgnoredStatuses,
		DeleteEOL: c.DeleteEOLImages, DeleteFailed: c.DeleteFailedImages,
	}
}
