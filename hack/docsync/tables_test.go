package docsync

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/util/jsonfields"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

const (
	configBegin = "<!-- config additions: generated from the schema and docs/configuration.md by `UPDATE=1 go test ./hack/docsync` -->"
	configEnd   = "<!-- config additions end -->"
)

func readRepo(t *testing.T, parts ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{repo.Root()}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func readYAML(t *testing.T, parts ...string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(readRepo(t, parts...)), &doc); err != nil {
		t.Fatalf("%s: %v", filepath.Join(parts...), err)
	}
	return doc
}

// upstreamConfigKeys are the EraserConfig keys upstream documents: its
// shipped documents of each version (the project's fixtures shaped like
// them) and the keys it listed without reading them, which the reference
// lists as accepted and ignored.
func upstreamConfigKeys(t *testing.T, reference string) []string {
	var keys []string
	for _, v := range []string{"v1alpha1", "v1alpha2", "v1alpha3"} {
		keys = append(keys, DocumentLeaves(readYAML(t, "internal", "wire", "config", "testdata", "upstream", v+".yaml"))...)
	}
	for _, r := range ReferenceRows(reference, map[string]string{"Keys accepted and ignored": ""}) {
		keys = append(keys, r.Keys...)
	}
	return keys
}

// configKeys are the EraserConfig's keys, from the schema its Go types
// generate (the chart's values.schema.json holds the same).
func configKeys() []string {
	var keys []string
	for _, k := range SchemaLeaves(config.Schema()) {
		if strings.HasPrefix(k, "manager.") || strings.HasPrefix(k, "components.") {
			keys = append(keys, k)
		}
	}
	return keys
}

const scannerConfig = "components.scanner.config."

// scannerConfigKeys are the Trivy scanner's keys (components.scanner.config
// is a document of its own, which the EraserConfig's schema holds as one
// string), from the type its parser fills: a struct is a section, unless it
// reads itself from one value (a duration).
func scannerConfigKeys() []string {
	var out []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, path string) {
		for k, ft := range jsonfields.Of(t) {
			if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(reflect.TypeFor[json.Unmarshaler]()) {
				walk(ft, path+k+".")
				continue
			}
			out = append(out, path+k)
		}
	}
	walk(reflect.TypeFor[scanconfig.Config](), scannerConfig)
	slices.Sort(out)
	return out
}

// upstreamScannerConfigKeys are the scanner keys of upstream's documents:
// their components.scanner.config strings, read as the documents they are.
func upstreamScannerConfigKeys(t *testing.T) []string {
	var keys []string
	for _, v := range []string{"v1alpha1", "v1alpha2", "v1alpha3"} {
		doc := readYAML(t, "internal", "wire", "config", "testdata", "upstream", v+".yaml")
		components, _ := doc["components"].(map[string]any)
		scanner, _ := components["scanner"].(map[string]any)
		text, _ := scanner["config"].(string)
		var sc map[string]any
		if err := yaml.Unmarshal([]byte(text), &sc); err != nil {
			t.Fatalf("%s's components.scanner.config: %v", v, err)
		}
		for _, k := range DocumentLeaves(sc) {
			keys = append(keys, scannerConfig+k)
		}
	}
	if len(keys) == 0 {
		t.Fatal("no scanner configuration in upstream's documents")
	}
	return keys
}

// TestConfigAdditionsTable: the README's table of the EraserConfig keys
// upstream does not have is every such key of the schema and of the Trivy
// scanner's configuration, each as the configuration reference documents
// it; and the reference documents every one.
func TestConfigAdditionsTable(t *testing.T) {
	reference := readRepo(t, "docs", "configuration.md")
	added := Added(configKeys(), upstreamConfigKeys(t, reference))
	// Not through Added: its component keys are written once for every
	// component, and these are the scanner's alone.
	for _, k := range scannerConfigKeys() {
		if !slices.Contains(upstreamScannerConfigKeys(t), k) {
			added = append(added, k)
		}
	}
	rows := ReferenceRows(reference, map[string]string{
		"manager":    "manager.",
		"components": "components.<c>.",
		"components.scanner.config (the Trivy scanner)": scannerConfig,
	})
	want, missing := AddedTable(added, rows, "docs/configuration.md")
	for _, k := range missing {
		t.Errorf("docs/configuration.md documents no %s, which the schema has and upstream does not", k)
	}
	update(t, "README.md", configBegin, configEnd, want)
}

// update compares the generated text between a page's markers with want,
// or, with UPDATE=1, writes it there.
func update(t *testing.T, page, begin, end, want string) {
	t.Helper()
	text := readRepo(t, page)
	have, err := Between(text, begin, end)
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if have == want {
		return
	}
	if os.Getenv("UPDATE") == "1" {
		out, err := Replace(text, begin, end, want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo.Root(), page), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's generated table is stale (run UPDATE=1 go test ./hack/docsync) (-page +generated):\n%s", page, cmp.Diff(have, want))
}

const (
	valuesBegin = "<!-- values: every key of the chart's values.schema.json, checked by `go test ./hack/docsync`; `UPDATE=1` adds a row for a key missing here -->"
	valuesEnd   = "<!-- values end -->"
)

// TestChartValuesTable: docs/install.md's values table names every key of
// the chart's schema (runtimeConfig as one, docs/configuration.md has its
// keys), and says of each key upstream's chart lacks that it is not in
// upstream, and of no other. UPDATE=1 adds the missing keys' rows, from the
// schema's descriptions and values.yaml's defaults, to be edited.
func TestChartValuesTable(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal([]byte(readRepo(t, "charts", "eraser", "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	keys := []string{"runtimeConfig"}
	for _, k := range SchemaLeaves(schema) {
		if !strings.HasPrefix(k, "runtimeConfig.") {
			keys = append(keys, k)
		}
	}
	var upstream []string
	for _, f := range []string{"values-v1alpha1.yaml", "values-v1alpha3.yaml", "values-e2e-images.yaml", "values-e2e-legacy-key.yaml"} {
		upstream = append(upstream, DocumentLeaves(readYAML(t, "internal", "wire", "config", "testdata", "upstream", f))...)
	}
	page := readRepo(t, "docs", "install.md")
	table, err := Between(page, valuesBegin, valuesEnd)
	if err != nil {
		t.Fatalf("docs/install.md: %v", err)
	}
	rows := ValuesRows(table)
	if len(rows) == 0 {
		t.Fatal("no rows in docs/install.md's values table")
	}
	problems := ValuesProblems(rows, keys, upstream)
	if os.Getenv("UPDATE") == "1" {
		add := MissingRows(rows, keys, upstream, SchemaDescriptions(schema), readYAML(t, "charts", "eraser", "values.yaml"))
		if add != "" {
			update(t, "docs/install.md", valuesBegin, valuesEnd, table+add)
			return
		}
	}
	for _, p := range problems {
		t.Errorf("docs/install.md's values table: %s", p)
	}
}
