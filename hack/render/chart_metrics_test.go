package render

// The chart's metrics: the manager's metrics Service, the Prometheus
// operator's kinds and the dashboard; what the alerts say; and that every
// metric they and the dashboards name is one the manager serves.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The manager's metrics port has a Service; the Prometheus operator's kinds
// and the dashboard render only when enabled.
func TestChartMetrics(t *testing.T) {
	objs := render(t, Options{})
	svc := get[corev1.Service](t, objs, "Service", "eraser-controller-manager-metrics")
	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	if !cmp.Equal(svc.Spec.Selector, dep.Spec.Selector.MatchLabels) {
		t.Errorf("Service selects %v, the manager's pods are %v", svc.Spec.Selector, dep.Spec.Selector.MatchLabels)
	}
	want := []corev1.ServicePort{{Name: "metrics", Port: 8889, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}}
	if !cmp.Equal(svc.Spec.Ports, want) {
		t.Errorf("Service ports %+v, want %+v", svc.Spec.Ports, want)
	}
	if !slices.ContainsFunc(dep.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
		return p.Name == "metrics" && p.ContainerPort == 8889
	}) {
		t.Error("the manager container has no port named metrics on 8889")
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		for _, u := range objs {
			if u.GetKind() == kind {
				t.Errorf("%s rendered by default", kind)
			}
		}
	}
	if find(objs, "ConfigMap", "eraser-grafana-dashboard") != nil {
		t.Error("dashboard ConfigMap rendered by default")
	}
	if off := render(t, Options{Set: []string{"metrics.service.enabled=false"}}); find(off, "Service", svc.Name) != nil {
		t.Error("metrics.service.enabled=false still renders the Service")
	}
	if _, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, Set: []string{"metrics.service.enabled=false", "metrics.serviceMonitor.enabled=true"}}); err == nil ||
		!strings.Contains(err.Error(), "needs metrics.service.enabled") {
		t.Errorf("a ServiceMonitor without its Service: err %v", err)
	}

	objs = render(t, Options{Namespace: "ops", Set: []string{
		"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prometheus", "metrics.serviceMonitor.interval=30s",
		"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prometheus", "metrics.prometheusRule.severity=critical",
		"metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring",
	}})
	svc = get[corev1.Service](t, objs, "Service", "eraser-controller-manager-metrics")
	sm := find(objs, "ServiceMonitor", "eraser-controller-manager")
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetNamespace() != "ops" || sm.GetLabels()["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %s in %q, labels %v", sm.GetAPIVersion(), sm.GetNamespace(), sm.GetLabels())
	}
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s; the Service's labels are %v", k, v, svc.Labels)
		}
	}
	if len(sel) == 0 {
		t.Error("ServiceMonitor selects every Service")
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["interval"] != "30s" {
		t.Errorf("ServiceMonitor endpoints %v", endpoints)
	}

	pr := find(objs, "PrometheusRule", "eraser")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	rules := ruleExpressions(t, pr)
	if len(rules) < 2 || pr.GetLabels()["release"] != "prometheus" {
		t.Errorf("PrometheusRule rules %v, labels %v", rules, pr.GetLabels())
	}
	for alert, expr := range rules {
		if !strings.Contains(expr, `namespace="ops"`) {
			t.Errorf("alert %s is not scoped to the release's namespace: %s", alert, expr)
		}
	}

	cm := get[corev1.ConfigMap](t, objs, "ConfigMap", "eraser-grafana-dashboard")
	file, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "eraser.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || strings.TrimSpace(cm.Data["eraser.json"]) != strings.TrimSpace(string(file)) {
		t.Errorf("dashboard ConfigMap in %q, labels %v, or its JSON differs from dashboards/eraser.json", cm.Namespace, cm.Labels)
	}
}

// TestChartNodeFailingRunsAlert: the alert on a node failing runs in a
// row fires per node at metrics.prometheusRule.nodeFailedRunsThreshold (3
// by default), and its annotations leave Prometheus' templates to it.
func TestChartNodeFailingRunsAlert(t *testing.T) {
	cases := map[string]struct {
		set  []string
		want string
	}{
		"default": {
			want: `max by (node_name) (eraser_node_consecutive_failed_runs{namespace="eraser-system"}) >= 3`,
		},
		"threshold set": {
			set:  []string{"metrics.prometheusRule.nodeFailedRunsThreshold=5"},
			want: `max by (node_name) (eraser_node_consecutive_failed_runs{namespace="eraser-system"}) >= 5`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pr := find(render(t, Options{Namespace: "eraser-system", Set: append([]string{"metrics.prometheusRule.enabled=true"}, tc.set...)}),
				"PrometheusRule", "eraser")
			if pr == nil {
				t.Fatal("no PrometheusRule")
			}
			if diff := cmp.Diff(tc.want, ruleExpressions(t, pr)["EraserNodeFailingRuns"]); diff != "" {
				t.Errorf("EraserNodeFailingRuns expression (-want +got):\n%s", diff)
			}
			summary := ruleAnnotations(pr, "EraserNodeFailingRuns")["summary"]
			if !strings.Contains(summary, "{{ $labels.node_name }}") || !strings.Contains(summary, "{{ $value }}") {
				t.Errorf("summary %q does not name the node and count for Prometheus to fill in", summary)
			}
		})
	}
	_, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, Set: []string{"metrics.prometheusRule.nodeFailedRunsThreshold=0"}})
	if err == nil || !strings.Contains(err.Error(), "/metrics/prometheusRule/nodeFailedRunsThreshold") {
		t.Errorf("threshold 0: err %v, want the schema to refuse it", err)
	}
}

// ruleAnnotations are the annotations of a PrometheusRule's alert.
func ruleAnnotations(pr *unstructured.Unstructured, alert string) map[string]string {
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			if rule["alert"] == alert {
				out, _, _ := unstructured.NestedStringMap(rule, "annotations")
				return out
			}
		}
	}
	return nil
}

// ruleExpressions are a PrometheusRule's expressions by alert name.
func ruleExpressions(t *testing.T, pr *unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			if name == "" {
				name, _ = rule["record"].(string)
			}
			expr, ok := rule["expr"].(string)
			if !ok || name == "" {
				t.Fatalf("rule without a name or expression: %v", rule)
			}
			out[name] = expr
		}
	}
	return out
}

// servedMetrics are the series the manager serves (docs/metrics.md).
var servedMetrics = map[string]bool{
	"imagejob_run_total":                           true,
	"pods_completed_run_total":                     true,
	"pods_failed_run_total":                        true,
	"imagejob_duration_run_seconds_bucket":         true,
	"imagejob_duration_run_seconds_sum":            true,
	"imagejob_duration_run_seconds_count":          true,
	"images_removed_run_total":                     true,
	"vulnerable_images_run_total":                  true,
	"eraser_config_last_reload_successful":         true,
	"eraser_bytes_freed_run_total":                 true,
	"eraser_bytes_expected_freed_run_total":        true,
	"eraser_bytes_reclaimed_run_total":             true,
	"eraser_imagefs_capacity_bytes":                true,
	"eraser_scan_verdicts_contradicted_total":      true,
	"eraser_imagefs_used_before_bytes":             true,
	"eraser_imagefs_used_after_bytes":              true,
	"eraser_last_successful_run_timestamp_seconds": true,
	"eraser_node_consecutive_failed_runs":          true,
	"eraser_node_last_cleaned_timestamp_seconds":   true,
	"eraser_nodes_not_cleaned":                     true,
	"eraser_paused":                                true,
	"eraser_images_refused_run_total":              true,
	"eraser_scan_db_fetches_total":                 true,
	"eraser_regret_returns_total":                  true,
	"eraser_regret_bytes_total":                    true,
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true}
)

// metricNames are the metric names a PromQL expression selects: what is
// left of its identifiers once strings, label matchers, ranges, grouping
// clauses, function names (an identifier before "(") and keywords are gone.
func metricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, "{}")
	s = promRange.ReplaceAllString(s, "[]")
	s = promGrouping.ReplaceAllString(s, "")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // an exponent or unit of a number, e.g. 1e3
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") || promKeywords[strings.ToLower(name)] {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (node_name) (increase(images_removed_run_total{namespace=~"$namespace"}[1h]))`:         {"images_removed_run_total"},
		`histogram_quantile(0.9, sum without(pod) (rate(imagejob_duration_run_seconds_bucket[5m])))`:   {"imagejob_duration_run_seconds_bucket"},
		`max(eraser_config_last_reload_successful{job="x"}) == 0 and on(namespace) up offset 1h > 1e3`: {"eraser_config_last_reload_successful", "up"},
		`rate(a_total[$__rate_interval]) / ignoring(le) group_left b_total unless absent(c{l="d(e)"})`: {"a_total", "b_total", "c"},
	} {
		if got := metricNames(expr); !cmp.Equal(got, want) {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

// Every PromQL expression the chart ships, in the dashboard and in the
// PrometheusRule, selects only metrics the manager serves.
func TestMonitoringNamesServedMetrics(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(), "dashboards", "eraser.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dashboard); err != nil {
		t.Fatalf("dashboards/eraser.json: %v", err)
	}
	exprs := map[string]string{}
	for _, p := range dashboard.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			exprs["panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(\s*([^,)]+)`)
	for _, v := range dashboard.Templating.List {
		q, _ := v.Query.(map[string]any)
		if s, ok := q["query"].(string); ok {
			m := labelValues.FindStringSubmatch(s)
			if m == nil {
				t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, s)
				continue
			}
			exprs["variable "+v.Name] = m[1]
		}
	}
	pr := find(render(t, Options{Set: []string{"metrics.prometheusRule.enabled=true"}}), "PrometheusRule", "eraser")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	for alert, expr := range ruleExpressions(t, pr) {
		exprs["alert "+alert] = expr
	}
	for where, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			if !servedMetrics[n] {
				t.Errorf("%s: %s is not a metric the manager serves (%q)", where, n, expr)
			}
		}
	}
}
