package scan

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// scannerBlobs are the components.scanner.config strings of the project's
// EraserConfig fixtures, which seed the fuzzer with realistic documents.
func scannerBlobs(f *testing.F) []string {
	var out []string
	for _, pattern := range []string{"*.yaml", filepath.Join("upstream", "*.yaml")} {
		files, _ := filepath.Glob(filepath.Join("..", "..", "wire", "config", "testdata", pattern))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			var doc struct {
				Components struct {
					Scanner struct {
						Config string `json:"config"`
					} `json:"scanner"`
				} `json:"components"`
			}
			if yaml.Unmarshal(data, &doc) == nil && doc.Components.Scanner.Config != "" {
				out = append(out, doc.Components.Scanner.Config)
			}
		}
	}
	if len(out) == 0 {
		f.Fatal("no scanner configs among internal/wire/config's fixtures")
	}
	return out
}

// FuzzParseConfig: whatever components.scanner.config holds, ParseConfig
// never panics, and a document it accepts gives a configuration the scanner
// can run with: a place for the DB and a way to get it, known package types,
// severities to judge by, and bounded non-negative timeouts.
func FuzzParseConfig(f *testing.F) {
	for _, blob := range scannerBlobs(f) {
		f.Add(blob)
	}
	f.Add("")
	f.Add("timeout: {total: -1h}")
	f.Add("timeout: {perImage: 1}")
	f.Add("dbRepo: ''\nskipDBUpdate: true")
	f.Add("vulnerabilities: {severities: null, types: [os]}")
	f.Add("dbDownloadTimeout: 0s")
	f.Add("DeleteFailedImages: true")
	f.Add("runtime: {name: crio}\nsecurityChecks: [vuln]\nvulnerabilities: {severites: [LOW]}")
	f.Add("skipDbUpdates: true")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := scanconfig.ParseConfig(doc)
		if err != nil {
			if !reflect.ValueOf(cfg).IsZero() {
				t.Fatalf("a configuration came with the error %v: %+v", err, cfg)
			}
			return
		}
		if cfg.CacheDir == "" || (cfg.DBRepo == "" && !cfg.SkipDBUpdate) {
			t.Fatalf("accepted a configuration without a DB: %+v", cfg)
		}
		for _, typ := range cfg.Vulnerabilities.Types {
			if typ != "os" && typ != "library" {
				t.Fatalf("accepted package type %q", typ)
			}
		}
		if cfg.Vulnerabilities.Severities == nil {
			t.Fatal("accepted a configuration without severities")
		}
		if cfg.Timeout.Total.Duration < 0 || cfg.Timeout.PerImage.Duration < 0 {
			t.Fatalf("accepted negative timeouts %+v", cfg.Timeout)
		}
		if cfg.DBDownloadTimeout.Duration <= 0 {
			t.Fatalf("accepted DB download timeout %v: the download would have no deadline", cfg.DBDownloadTimeout.Duration)
		}
		if p := PolicyOf(cfg); p.DeleteFailed != cfg.DeleteFailedImages || !slices.Equal(p.Severities, cfg.Vulnerabilities.Severities) {
			t.Fatalf("policy %+v does not follow the configuration %+v", p, cfg)
		}
	})
}

// FuzzParseTrivyJSON: whatever Trivy printed, the report parser never
// panics, and every finding it returns has a package type the policy knows.
func FuzzParseTrivyJSON(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "trivy-alpine.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"SchemaVersion":2,"Results":[{"Target":"x","Class":"os-pkgs"}]}`))
	f.Add([]byte(`{"Metadata":{"OS":null},"Results":null}`))
	f.Add([]byte("Error: no DB"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseTrivyJSON(data)
		if err != nil {
			if r.EndOfLife || r.Unsupported || r.Findings != nil {
				t.Fatalf("a report came with the error %v: %+v", err, r)
			}
			return
		}
		for _, f := range r.Findings {
			if f.Type != "os" && f.Type != "library" {
				t.Fatalf("finding of type %q", f.Type)
			}
		}
	})
}
