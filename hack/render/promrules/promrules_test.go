package promrules

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/hack/render"
)

// rulesFile is the name the test files' rule_files give the rendered rules.
const rulesFile = "eraser-rules.yaml"

// repoRoot: the tests run in this package's directory, hack/render/promrules.
var repoRoot = filepath.Join("..", "..", "..")

// chartRules renders the chart's PrometheusRule as helm template does for
// the release namespace eraser-system (render.DefaultNamespace), every
// expression scoped with namespace="eraser-system" as installed, and
// returns its spec as a Prometheus rule file, with the alerts' names.
func chartRules(t *testing.T) ([]byte, []string) {
	t.Helper()
	out, err := render.Chart(filepath.Join(repoRoot, "charts", "eraser"), render.Options{
		Set: []string{"metrics.prometheusRule.enabled=true"},
		// As hack/render's tests: a test binary's Helm defaults to v1.20.
		KubeVersion: "v1.37.2",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Spec struct {
				Groups []struct {
					Rules []map[string]any `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("decoding the chart's output: %v", err)
		}
		if obj.Kind != "PrometheusRule" || obj.Metadata.Name != "eraser" {
			continue
		}
		if obj.Metadata.Namespace != render.DefaultNamespace {
			t.Fatalf("PrometheusRule in namespace %q, the tests' series are in %q", obj.Metadata.Namespace, render.DefaultNamespace)
		}
		var spec map[string]any
		if err := yaml.Unmarshal([]byte(doc), &spec); err != nil {
			t.Fatal(err)
		}
		file, err := yaml.Marshal(spec["spec"])
		if err != nil {
			t.Fatal(err)
		}
		var alerts []string
		for _, g := range obj.Spec.Groups {
			for _, r := range g.Rules {
				if a, ok := r["alert"].(string); ok {
					alerts = append(alerts, a)
				}
			}
		}
		return file, alerts
	}
	t.Fatal("the chart rendered no PrometheusRule eraser with metrics.prometheusRule.enabled=true")
	return nil, nil
}

// testFiles are the promtool unit-test files, by base name.
func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files in testdata (%v)", err)
	}
	return files
}

// unitTests is the part of promtool's test file format the coverage check reads.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name  string `json:"name"`
		Cases []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertHasPromtoolTests: every alert of the chart is tested by
// promtool both where it must fire and where it must not, and the tests
// name no alert the chart does not have. Needs no promtool.
func TestEveryAlertHasPromtoolTests(t *testing.T) {
	_, alerts := chartRules(t)
	if len(alerts) == 0 {
		t.Fatal("the chart's PrometheusRule has no alerts")
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, f := range testFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTests
		if err := yaml.Unmarshal(data, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(u.RuleFiles, []string{rulesFile}) {
			t.Errorf("%s: rule_files is %q, want [%q] (the chart's rules as rendered)", f, u.RuleFiles, rulesFile)
		}
		for _, g := range u.Tests {
			for _, c := range g.Cases {
				if !slices.Contains(alerts, c.Alertname) {
					t.Errorf("%s, %q: alert %q is not in the chart's PrometheusRule (%v)", f, g.Name, c.Alertname, alerts)
				}
				if len(c.ExpAlerts) > 0 {
					fires[c.Alertname]++
				} else {
					silent[c.Alertname]++
				}
			}
		}
	}
	for _, a := range alerts {
		if fires[a] == 0 {
			t.Errorf("alert %s has no promtool test where it fires (exp_alerts with an alert) in %s", a, filepath.Join("hack", "render", "promrules", "testdata"))
		}
		if silent[a] == 0 {
			t.Errorf("alert %s has no promtool test where it must not fire (exp_alerts: []) in %s", a, filepath.Join("hack", "render", "promrules", "testdata"))
		}
	}
}

// promtool is the binary to run: $PROMTOOL, else the one
// hack/build-promtool.sh has cached. In CI a missing promtool fails the
// test; elsewhere the test says how to get one and skips.
func promtool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		// The unit tier runs before any tool is built.
		t.Skip("install tier: make test-promrules runs promtool")
	}
	if p := os.Getenv("PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PROMTOOL=%s: %v", p, err)
		}
		return p
	}
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "build-promtool.sh"))
	cmd.Env = append(os.Environ(), "CHECK_ONLY=1")
	if out, err := cmd.Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	msg := "PROMTOOL is not set and hack/build-promtool.sh has built none: run make test-promrules, which builds promtool from the module proxy once (about 2 min), or set PROMTOOL"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestPromtoolRules: promtool check rules accepts the chart's rules as
// rendered, and promtool test rules passes every test file against them.
func TestPromtoolRules(t *testing.T) {
	bin := promtool(t)
	rules, _ := chartRules(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFile), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out.String())
	}
	run(t, "check", "rules", rulesFile)
	for _, f := range testFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// Beside the rendered rules, which rule_files names relative to it.
			name := filepath.Base(f)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, "test", "rules", name)
		})
	}
}
