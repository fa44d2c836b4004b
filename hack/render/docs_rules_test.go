package render

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The plain Prometheus rule file in docs/metrics.md is the chart's
// PrometheusRule, written by this test: one source for both.
const (
	rulesBegin = "<!-- rules: the chart's PrometheusRule, written by `UPDATE=1 go -C hack/render test -run TestDocsRulesAreTheChart` -->\n```yaml\n"
	rulesEnd   = "```\n<!-- rules end -->"
)

// namespaceMatcher is the chart's scoping of each expression to the
// release's namespace, which a plain rule file leaves to its scrape config.
var namespaceMatcher = regexp.MustCompile(`namespace="[^"]*",?`)

// plainRules renders the chart's alerts as a Prometheus rule file.
func plainRules(t *testing.T) string {
	t.Helper()
	pr := find(render(t, Options{Set: []string{"metrics.prometheusRule.enabled=true"}}), "PrometheusRule", "eraser")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	groups, _, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			expr := namespaceMatcher.ReplaceAllString(rule["expr"].(string), "")
			rule["expr"] = strings.ReplaceAll(expr, "{}", "")
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestDocsRulesAreTheChart: docs/metrics.md's rule file is the chart's
// rules without the namespace matcher; UPDATE=1 writes it.
func TestDocsRulesAreTheChart(t *testing.T) {
	path := repoPath("docs", "metrics.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	start := strings.Index(doc, rulesBegin)
	end := strings.Index(doc, rulesEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/metrics.md has no block between %q and %q", rulesBegin, rulesEnd)
	}
	have, want := doc[start+len(rulesBegin):end], plainRules(t)
	if have == want {
		return
	}
	if os.Getenv("UPDATE") != "" {
		if err := os.WriteFile(path, []byte(doc[:start+len(rulesBegin)]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/metrics.md's rule file is not the chart's (run UPDATE=1 go -C hack/render test -run TestDocsRulesAreTheChart) (-docs +chart):\n%s", cmp.Diff(have, want))
}
