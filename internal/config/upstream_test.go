package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// upstreamData is the shared reference data beside the project's checkout:
// upstream Eraser's own files, read in place and never copied.
func upstreamData(t *testing.T, sub string) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "reference", "upstream-data", sub)
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("upstream compatibility fixtures not present at %s; this tier runs only where they exist", dir)
	}
	return files
}

// TestUpstreamConfigs parses every EraserConfig upstream Eraser shipped and
// checks the values a migrating user relies on.
func TestUpstreamConfigs(t *testing.T) {
	for _, f := range upstreamData(t, "configs") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			cfg, warnings, err := Parse(data)
			if err != nil {
				t.Fatalf("upstream config refused: %v", err)
			}
			t.Logf("warnings: %q", warnings)
			checkShipped(t, cfg)
			if cfg.Components.Scanner.Config == "" {
				t.Error("the scanner's config blob was lost")
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
	for _, f := range upstreamData(t, "helm") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var values map[string]any
			if err := yaml.Unmarshal(data, &values); err != nil {
				t.Fatal(err)
			}
			rc, ok := values["runtimeConfig"].(map[string]any)
			if !ok {
				t.Skip("no runtimeConfig in this values file")
			}
			if _, ok := rc["apiVersion"]; !ok {
				// The v1.0.0 chart's values carry no apiVersion; its template
				// wrote the v1alpha1 header around them.
				rc["apiVersion"], rc["kind"] = VersionV1alpha1, Kind
			}
			doc, err := yaml.Marshal(rc)
			if err != nil {
				t.Fatal(err)
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
