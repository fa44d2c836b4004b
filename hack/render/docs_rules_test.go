package render

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The plain Prometheus rule file in docs/metrics.md is the chart's
// PrometheusRule, written by this test: one source for both.
const (
	rulesBegin = "<!-- rules: the chart's PrometheusRule, generated from the chart: docs/dev/testing.md says how -->\n```yaml\n"
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

// TestDocsCountAndNameEveryAlert: a page that counts the chart's alerts
// ("five alerts") counts them right, and the install and metrics pages
// name each one.
func TestDocsCountAndNameEveryAlert(t *testing.T) {
	pr := find(render(t, Options{Set: []string{"metrics.prometheusRule.enabled=true"}}), "PrometheusRule", "eraser")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	var alerts []string
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if name, ok := r.(map[string]any)["alert"].(string); ok {
				alerts = append(alerts, name)
			}
		}
	}
	words := map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
	counted := regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight|nine|ten|\d+) alerts\b`)
	pages, err := filepath.Glob(repoPath("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, repoPath("README.md"), repoPath("charts", "eraser", "README.md"), repoPath("charts", "eraser", "values.yaml"))
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range counted.FindAllStringSubmatch(string(data), -1) {
			n, ok := words[strings.ToLower(m[1])]
			if !ok {
				n, _ = strconv.Atoi(m[1])
			}
			if n != len(alerts) {
				t.Errorf("%s says %q: the chart has %d alerts (%s)", filepath.Base(page), m[0], len(alerts), strings.Join(alerts, ", "))
			}
		}
	}
	for _, page := range []string{repoPath("docs", "install.md"), repoPath("docs", "metrics.md")} {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range alerts {
			if !strings.Contains(string(data), "`"+a+"`") {
				t.Errorf("%s does not name the alert %s", filepath.Base(page), a)
			}
		}
	}
}
