package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// The compatibility tests run on the project's own upstream-shaped fixtures
// (testdata/upstream) always, and also on upstream's own files where they
// are beside the checkout: a clone without them still checks everything the
// fixtures cover.

// referenceData is upstream's own files in the shared reference data beside
// the project's checkout, read in place and never copied. The test skips,
// saying so, where the folder is absent.
func referenceData(t *testing.T, sub string) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "shared", "reference", "upstream-data", sub)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("upstream's own files are not at %s; the fixtures in testdata/upstream were checked instead", dir)
	}
	return files
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const helmWarning = "ignored, as by upstream Eraser; the manager's flags configure it"

var helmWarnings = []string{"health: " + helmWarning, "metrics: " + helmWarning, "webhook: " + helmWarning, "leaderElection: " + helmWarning}

// shippedWant is what upstream's shipped EraserConfig of each version means
// here: its values over our defaults, CPU values of 0 meaning none.
func shippedWant(apiVersion, removerImage string) *Config {
	want := defaults(apiVersion)
	want.Manager.PullSecrets = []string{}
	want.Manager.NodeFilter.Selectors = []string{CleanupFilterLabel, "kubernetes.io/os=windows"}
	c := &want.Components
	c.Collector.Enabled, c.Scanner.Enabled = true, true
	c.Collector.Image = Image{Repo: "COLLECTOR_REPO", Tag: "COLLECTOR_TAG"}
	c.Scanner.Image = Image{Repo: "SCANNER_REPO", Tag: "SCANNER_TAG"}
	c.Remover.Image = Image{Repo: removerImage + "_REPO", Tag: removerImage + "_TAG"}
	c.Remover.Request.CPU = nil
	// Upstream's sizes, written out in its files, are kept over ours.
	c.Scanner.Request = Resources{Mem: q("500Mi"), CPU: q("1")}
	c.Remover.Limit.Mem = q("30Mi")
	if apiVersion == VersionV1alpha3 {
		want.Manager.AdditionalPodLabels = map[string]string{}
	}
	return want
}

// TestUpstreamShapedConfigs parses the fixtures shaped like the EraserConfig
// of each upstream release, with the values a migrating user relies on.
func TestUpstreamShapedConfigs(t *testing.T) {
	cases := map[string]struct {
		want     *Config
		warnings []string
		scanner  func(*scanconfig.Config)
	}{
		"v1alpha1.yaml": {
			want:     shippedWant(VersionV1alpha1, "ERASER"),
			warnings: []string{"components.eraser.limit.cpu: ignored: worker containers get no CPU limit"},
			scanner: func(s *scanconfig.Config) {
				s.DeleteFailedImages = true
				s.Vulnerabilities.IgnoreUnfixed = true
				s.Vulnerabilities.Severities = []string{"CRITICAL"}
			},
		},
		"v1alpha2.yaml": {want: shippedWant(VersionV1alpha2, "REMOVER"), scanner: func(s *scanconfig.Config) { s.DeleteFailedImages = true }},
		"v1alpha3.yaml": {want: shippedWant(VersionV1alpha3, "REMOVER"), scanner: func(s *scanconfig.Config) { s.DeleteFailedImages = true }},
	}
	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			cfg, warnings, err := Parse(readFile(t, filepath.Join("testdata", "upstream", file)))
			if err != nil {
				t.Fatalf("upstream-shaped config refused: %v", err)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			// The scanner's blob is compared as the scanner reads it.
			blob := cfg.Components.Scanner.Config
			cfg.Components.Scanner.Config = ""
			cfg.Components.Scanner.Trivy, tc.want.Components.Scanner.Trivy = nil, nil
			if diff := cmp.Diff(tc.want, cfg, cmpQuantity, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			got, err := scanconfig.ParseConfig(blob)
			if err != nil {
				t.Fatalf("the scanner refuses the shipped scanner config: %v", err)
			}
			want := scanconfig.DefaultConfig()
			tc.scanner(&want)
			// Its durations are unexported; they are compared all the same.
			if diff := cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
				t.Errorf("scanner config (-want +got):\n%s", diff)
			}
		})
	}
}

// helmDocument is the EraserConfig upstream's chart rendered from a values
// file: runtimeConfig as it is, under the v1alpha1 header the v1.0 chart's
// template wrote when it had no apiVersion. ok is false without one.
func helmDocument(t *testing.T, values []byte) (doc []byte, ok bool) {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	rc, ok := v["runtimeConfig"].(map[string]any)
	if !ok {
		return nil, false
	}
	if _, ok := rc["apiVersion"]; !ok {
		rc["apiVersion"], rc["kind"] = VersionV1alpha1, Kind
	}
	doc, err := yaml.Marshal(rc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, true
}

// TestUpstreamShapedHelmValues parses the runtimeConfig of the fixtures
// shaped like upstream's Helm values files. hack/render installs the chart
// with the same files.
func TestUpstreamShapedHelmValues(t *testing.T) {
	image := func(name, tag string) Image { return Image{Repo: version.DefaultRepo + "/" + name, Tag: tag} }
	cases := map[string]struct {
		noDocument bool
		apiVersion string
		warnings   []string
		images     []Image // collector, scanner, remover
		enabled    bool
	}{
		"values-v1alpha1.yaml": {
			apiVersion: VersionV1alpha1, warnings: helmWarnings, enabled: true,
			images: []Image{image("collector", "v1.0.0"), image("eraser-trivy-scanner", "v1.0.0"), image("remover", "v1.0.0")},
		},
		"values-v1alpha3.yaml": {
			apiVersion: VersionV1alpha3, warnings: helmWarnings, enabled: true,
			images: []Image{image("collector", "v1.5.0-beta.0"), image("eraser-trivy-scanner", "v1.5.0-beta.0"), image("remover", "v1.5.0-beta.0")},
		},
		"values-e2e-images.yaml": {
			apiVersion: VersionV1alpha3,
			images:     []Image{{"fixture-collector-jwx", "t-collector-82"}, {"fixture-scanner-pkd", "t-scanner-83"}, {"fixture-remover-qzv", "t-remover-81"}},
		},
		"values-e2e-legacy-key.yaml": {noDocument: true},
	}
	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			doc, ok := helmDocument(t, readFile(t, filepath.Join("testdata", "upstream", file)))
			if ok == tc.noDocument {
				t.Fatalf("runtimeConfig present: %v, want %v", ok, !tc.noDocument)
			}
			if !ok {
				return
			}
			cfg, warnings, err := Parse(doc)
			if err != nil {
				t.Fatalf("upstream-shaped values refused: %v\n%s", err, doc)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			c := cfg.Components
			got := []Image{c.Collector.Image, c.Scanner.Image, c.Remover.Image}
			if diff := cmp.Diff(tc.images, got); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
			if cfg.APIVersion != tc.apiVersion || cfg.Manager.Runtime.Name != RuntimeContainerd ||
				c.Collector.Enabled != tc.enabled || c.Scanner.Enabled != tc.enabled {
				t.Errorf("config %+v", cfg)
			}
		})
	}
}

// TestUpstreamConfigs parses every EraserConfig upstream Eraser shipped and
// checks the values a migrating user relies on.
func TestUpstreamConfigs(t *testing.T) {
	for _, f := range referenceData(t, "configs") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, warnings, err := Parse(readFile(t, f))
			if err != nil {
				t.Fatalf("upstream config refused: %v", err)
			}
			t.Logf("warnings: %q", warnings)
			for _, w := range warnings {
				// Upstream's own scanner blobs use only keys its scanner read.
				if strings.HasPrefix(w, "components.scanner.config:") {
					t.Errorf("upstream's shipped scanner configuration draws %q", w)
				}
			}
			checkShipped(t, cfg)
			if _, err := scanconfig.ParseConfig(cfg.Components.Scanner.Config); err != nil || cfg.Components.Scanner.Config == "" {
				t.Errorf("the scanner's config blob was lost or refused: %v", err)
			}
			if got := cfg.Components.Remover.Limit.Mem; got == nil || got.String() != "30Mi" {
				t.Errorf("remover memory limit = %v, want 30Mi", got)
			}
		})
	}
}

// TestUpstreamHelmValues parses the runtimeConfig block of upstream's Helm
// values files, as their charts rendered it into the ConfigMap.
func TestUpstreamHelmValues(t *testing.T) {
	for _, f := range referenceData(t, "helm") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			doc, ok := helmDocument(t, readFile(t, f))
			if !ok {
				t.Skip("no runtimeConfig in this values file")
			}
			cfg, warnings, err := Parse(doc)
			if err != nil {
				t.Fatalf("upstream values refused: %v", err)
			}
			t.Logf("warnings: %q", warnings)
			if cfg.Manager.Runtime.Name != RuntimeContainerd {
				t.Errorf("runtime = %q", cfg.Manager.Runtime.Name)
			}
		})
	}
}

func checkShipped(t *testing.T, cfg *Config) {
	t.Helper()
	if cfg.Manager.Runtime != (Runtime{Name: RuntimeContainerd, Address: "unix:///run/containerd/containerd.sock", WindowsAddress: DefaultWindowsAddress}) {
		t.Errorf("runtime = %+v", cfg.Manager.Runtime)
	}
	if !cfg.Components.Collector.Enabled || !cfg.Components.Scanner.Enabled {
		t.Error("collector and scanner are enabled in every shipped config")
	}
	if got, want := cfg.Manager.NodeFilter.Selectors, []string{CleanupFilterLabel, "kubernetes.io/os=windows"}; !reflect.DeepEqual(got, want) {
		t.Errorf("selectors = %q, want %q", got, want)
	}
	if cfg.Manager.ImageJob.SuccessRatio != 1 || cfg.Manager.ImageJob.Cleanup.DelayOnFailure.Hours() != 24 {
		t.Errorf("imageJob = %+v", cfg.Manager.ImageJob)
	}
}

// TestEmbeddedNamesComplete guards pathOf: every struct the documents embed
// must be listed, or its Go name would show up in error paths.
func TestEmbeddedNamesComplete(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for rt.Kind() == reflect.Pointer || rt.Kind() == reflect.Slice || rt.Kind() == reflect.Map {
			rt = rt.Elem()
		}
		if rt.Kind() != reflect.Struct || seen[rt] || rt.PkgPath() != reflect.TypeFor[document]().PkgPath() {
			return
		}
		seen[rt] = true
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous && !embeddedNames[f.Name] {
				t.Errorf("%s embeds %s, which embeddedNames lacks", rt.Name(), f.Name)
			}
			walk(f.Type)
		}
	}
	for _, v := range []any{documentV1alpha1{}, documentV1alpha2{}, documentV1alpha3{}} {
		walk(reflect.TypeOf(v))
	}
}
