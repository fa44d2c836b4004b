package render

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/eraser-oss/eraser/internal/process/version"
)

// find is the one rendered object of kind and name, or nil.
func find(objs objects, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func writeValues(t *testing.T, doc string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// values.schema.json refuses a typo at the top level, in deploy and in
// metrics, naming the key, while every values file written for upstream's
// chart still renders.
func TestChartSchema(t *testing.T) {
	refused := map[string]struct{ values, want string }{
		"deploy typo":         {"deploy:\n  replicass: 2\n", "at '/deploy': additional properties 'replicass' not allowed"},
		"deploy.image typo":   {"deploy:\n  image:\n    reop: registry.example/manager\n", "at '/deploy/image': additional properties 'reop' not allowed"},
		"unknown top level":   {"runtimeConfig: {}\nrutimeConfig:\n  manager: {}\n", "at '': additional properties 'rutimeConfig' not allowed"},
		"metrics typo":        {"metrics:\n  serviceMonitor:\n    enable: true\n", "at '/metrics/serviceMonitor': additional properties 'enable' not allowed"},
		"wrong type":          {"deploy:\n  replicas: two\n", "at '/deploy/replicas'"},
		"bad pull policy":     {"deploy:\n  image:\n    pullPolicy: Sometimes\n", "at '/deploy/image/pullPolicy'"},
		"registry not a host": {"imageRegistry: \"https://registry.example\"\n", "at '/imageRegistry'"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, ValuesFiles: []string{writeValues(t, tc.values)}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}

	// The defaults, every documented value (TestChartValues) and every
	// upstream values file pass the schema.
	accepted := append(ownUpstreamValues(t), upstreamValuesIfPresent()...)
	accepted = append(accepted, writeValues(t, "runtimeConfig:\n  anything: {goes: here}\ndeploy:\n  image: {tag: 1.2}\nglobal: {}\n"))
	for _, f := range append([]string{""}, accepted...) {
		var files []string
		if f != "" {
			files = []string{f}
		}
		if _, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, ValuesFiles: files}); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}

// imageRegistry moves every image at the default location to the mirror,
// the tags unchanged, and leaves any other repository alone.
func TestChartImageRegistry(t *testing.T) {
	const mirror = "registry.example:5000/mirror"
	mirrored := func(name, tag string) string { return mirror + "/" + name + ":" + tag }
	cases := map[string]struct {
		o                    Options
		manager, windowsRepo string
		workers              []string // collector, scanner, remover
	}{
		"defaults": {
			o:       Options{Set: []string{"imageRegistry=" + mirror + "/"}},
			manager: mirrored("eraser-manager", version.Version),
			workers: []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), mirrored("remover", version.Version)},
		},
		"repositories set elsewhere are kept, default ones under windows moved": {
			o: Options{Set: []string{
				"imageRegistry=" + mirror,
				"deploy.image.repo=other.example/eraser-manager",
				"runtimeConfig.components.remover.image.repo=other.example/remover",
				"runtimeConfig.components.remover.image.tag=v2",
				"runtimeConfig.components.scanner.image.repo=" + version.DefaultRepo + "/eraser-trivy-scanner",
				"runtimeConfig.components.collector.windows.image.repo=" + version.DefaultRepo + "/collector",
				"runtimeConfig.components.collector.windows.image.tag=win",
			}},
			manager:     "other.example/eraser-manager:" + version.Version,
			workers:     []string{mirrored("collector", version.Version), mirrored("eraser-trivy-scanner", version.Version), "other.example/remover:v2"},
			windowsRepo: mirror + "/collector",
		},
		// v1.0.0's values: components.eraser is the remover; the manager
		// image is upstream's and stays so.
		"upstream v1alpha1 values": {
			o:       Options{ValuesFiles: []string{repoPath("internal", "wire", "config", "testdata", "upstream", "values-v1alpha1.yaml")}, Set: []string{"imageRegistry=" + mirror}},
			manager: "ghcr.io/azure/eraser-manager:v1.0.0",
			workers: []string{mirrored("collector", "v1.0.0"), mirrored("eraser-trivy-scanner", "v1.0.0"), mirrored("remover", "v1.0.0")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.o)
			checkInstall(t, objs, DefaultNamespace)
			cfg, _ := managerConfig(t, objs)
			c := cfg.Components
			if diff := cmp.Diff(tc.workers, []string{c.Collector.Image.Ref(), c.Scanner.Image.Ref(), c.Remover.Image.Ref()}); diff != "" {
				t.Errorf("worker images (-want +got):\n%s", diff)
			}
			if tc.windowsRepo != "" && c.Collector.Windows.Image.Repo != tc.windowsRepo {
				t.Errorf("collector's Windows image %s, want repo %s", c.Collector.Windows.Image.Ref(), tc.windowsRepo)
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			if got := dep.Spec.Template.Spec.Containers[0].Image; got != tc.manager {
				t.Errorf("manager image %s, want %s", got, tc.manager)
			}
		})
	}
}

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
