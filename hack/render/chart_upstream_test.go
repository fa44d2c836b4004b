package render

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// upstreamV1alpha3Values is the project's fixture of upstream's v1.x values
// file: upstream's images and tags, its manager's 30Mi limit, its node
// filter without Windows nodes.
func upstreamV1alpha3Values() string {
	return repoPath("internal", "wire", "config", "testdata", "upstream", "values-v1alpha3.yaml")
}

// Upstream's values that would mean something else under this chart are
// translated, each named in the NOTES: its images become this release's,
// its manager's memory this chart's default; Windows nodes stay out as
// they were.
func TestChartTranslatesUpstreamValues(t *testing.T) {
	objs := render(t, Options{ValuesFiles: []string{upstreamV1alpha3Values()}})
	dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
	c := dep.Spec.Template.Spec.Containers[0]
	if want := version.DefaultRepo + "/eraser-manager:" + version.Version; c.Image != want {
		t.Errorf("manager image %s, want %s", c.Image, want)
	}
	defaults := render(t, Options{})
	want := get[appsv1.Deployment](t, defaults, "Deployment", "eraser-controller-manager").Spec.Template.Spec.Containers[0].Resources
	if diff := cmp.Diff(want, c.Resources); diff != "" {
		t.Errorf("manager resources: want the chart's defaults for upstream's 30Mi (-want +got):\n%s", diff)
	}
	cfg, _ := managerConfig(t, objs)
	if diff := cmp.Diff([]string{"eraser.sh/cleanup.filter", "kubernetes.io/os=windows"}, cfg.Manager.NodeFilter.Selectors); diff != "" {
		t.Errorf("node filter (-want +got):\n%s", diff)
	}
	notes := renderNotesWith(t, DefaultNamespace, []string{upstreamV1alpha3Values()}, nil, false)
	for _, line := range []string{
		"deploy.image ghcr.io/eraser-dev/eraser-manager:v1.5.0-beta.0 is upstream's manager",
		"runtimeConfig.components.remover.image.tag v1.5.0-beta.0 is an upstream release's",
		"deploy.resources (memory limit 30Mi, request 20Mi) are upstream's manager's",
	} {
		if !strings.Contains(notes, line) {
			t.Errorf("NOTES lack %q:\n%s", line, notes)
		}
	}
	if plain := renderNotes(t, DefaultNamespace, nil, false); strings.Contains(plain, "translated") {
		t.Errorf("NOTES of the chart's own values speak of translations:\n%s", plain)
	}
}

// The chart's defaults keep Windows nodes out, as upstream's did, so that a
// values file that does not name the node filter changes nothing there.
func TestChartKeepsWindowsNodesOutByDefault(t *testing.T) {
	cfg, _ := managerConfig(t, render(t, Options{}))
	if diff := cmp.Diff([]string{"eraser.sh/cleanup.filter", "kubernetes.io/os=windows"}, cfg.Manager.NodeFilter.Selectors); diff != "" {
		t.Errorf("node filter (-want +got):\n%s", diff)
	}
	if cfg.Manager.NodeFilter.Type != "exclude" {
		t.Errorf("node filter type %q", cfg.Manager.NodeFilter.Type)
	}
}

// A manager memory limit that would only crash-loop is refused with the fix;
// one above the floor, in any unit, is kept.
func TestChartManagerMemoryFloor(t *testing.T) {
	cases := map[string]struct {
		limit string
		ok    bool
	}{
		"64Mi":          {"64Mi", false},
		"100M":          {"100M", false},
		"0.1Gi":         {"0.1Gi", false},
		"128Mi":         {"128Mi", true},
		"1Gi":           {"1Gi", true},
		"bytes, 200 MB": {"200000000", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Chart(chartDir(), Options{KubeVersion: kubeVersion, Set: []string{"deploy.resources.limits.memory=" + tc.limit}})
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "at least 128Mi")) {
				t.Fatalf("want a refusal naming the floor, got %v", err)
			}
		})
	}
}

// `helm upgrade --reuse-values` keeps the previous release's values alone,
// without the new chart's defaults: from upstream's release, or from an
// older version of this chart without this one's newer keys, the chart
// still renders whole (its CRDs, the install's record, the metrics Service).
func TestChartReuseValues(t *testing.T) {
	upstream := readValues(t, upstreamV1alpha3Values())
	older := readValues(t, repoPath("charts", "eraser", "values.yaml"))
	delete(older, "crds")
	delete(older, "metrics")
	delete(older, "imageRegistry")
	for name, prev := range map[string]map[string]any{"upstream's release": upstream, "an older version of this chart": older} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, Options{ReuseValues: prev})
			for _, o := range []struct{ kind, name string }{
				{"CustomResourceDefinition", "imagelists.eraser.sh"},
				{"CustomResourceDefinition", "imagejobs.eraser.sh"},
				{"ConfigMap", adoption.RecordName},
				{"Service", "eraser-controller-manager-metrics"},
			} {
				if find(objs, o.kind, o.name) == nil {
					t.Errorf("no %s %s rendered", o.kind, o.name)
				}
			}
			rec := get[corev1.ConfigMap](t, objs, "ConfigMap", adoption.RecordName)
			if rec.Data["about"] != adoption.About {
				t.Errorf("the record's about %q, want the manager's %q", rec.Data["about"], adoption.About)
			}
			dep := get[appsv1.Deployment](t, objs, "Deployment", "eraser-controller-manager")
			if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, version.DefaultRepo+"/") {
				t.Errorf("manager image %s: want this release's", img)
			}
		})
	}
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Upstream's default worker sizes, which a copied EraserConfig writes out,
// become this release's defaults, each named in the NOTES with the numbers
// the manager applies; any other size is kept as written.
func TestChartTranslatesUpstreamWorkerSizes(t *testing.T) {
	def := config.Default().Components
	scannerNote := fmt.Sprintf("runtimeConfig.components.scanner.request (cpu 1000m, mem 500Mi) is upstream's default, which a packed node refuses (OutOfcpu): this release's default (cpu %s, mem %s) is used",
		def.Scanner.Request.CPU, def.Scanner.Request.Mem)
	removerNote := func(key string) string {
		return fmt.Sprintf("runtimeConfig.components.%s.limit.mem 30Mi is upstream's default, at the edge for a node with many images: this release's default (%s) is used", key, def.Remover.Limit.Mem)
	}
	type sizes struct{ ScannerCPU, ScannerMem, RemoverLimit string }
	defaults := sizes{def.Scanner.Request.CPU.String(), def.Scanner.Request.Mem.String(), def.Remover.Limit.Mem.String()}
	cases := map[string]struct {
		set   []string
		want  sizes
		notes []string
	}{
		"upstream's scanner request": {
			set:   []string{"runtimeConfig.components.scanner.request.cpu=1000m", "runtimeConfig.components.scanner.request.mem=500Mi"},
			want:  defaults,
			notes: []string{scannerNote},
		},
		"upstream's remover limit": {
			set:   []string{"runtimeConfig.components.remover.limit.mem=30Mi", "runtimeConfig.components.remover.limit.cpu=0"},
			want:  defaults,
			notes: []string{removerNote("remover")},
		},
		"upstream's v1alpha1 eraser limit": {
			set:   []string{"runtimeConfig.components.eraser.limit.mem=30Mi"},
			want:  defaults,
			notes: []string{removerNote("eraser")},
		},
		"a scanner cpu of upstream's with another memory": {
			set:  []string{"runtimeConfig.components.scanner.request.cpu=1000m", "runtimeConfig.components.scanner.request.mem=300Mi"},
			want: sizes{"1", "300Mi", defaults.RemoverLimit},
		},
		"another remover limit": {
			set:  []string{"runtimeConfig.components.remover.limit.mem=40Mi"},
			want: sizes{defaults.ScannerCPU, defaults.ScannerMem, "40Mi"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, _ := managerConfig(t, render(t, Options{Set: tc.set}))
			c := cfg.Components
			got := sizes{c.Scanner.Request.CPU.String(), c.Scanner.Request.Mem.String(), c.Remover.Limit.Mem.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("worker sizes (-want +got):\n%s", diff)
			}
			notes := renderNotes(t, DefaultNamespace, tc.set, false)
			for _, line := range tc.notes {
				if !strings.Contains(notes, line) {
					t.Errorf("NOTES lack %q:\n%s", line, notes)
				}
			}
			if len(tc.notes) == 0 && strings.Contains(notes, "translated") {
				t.Errorf("NOTES speak of a translation:\n%s", notes)
			}
		})
	}

	// helm upgrade --reuse-values from upstream's release whose values
	// carry a copied configuration's sizes.
	prev := readValues(t, upstreamV1alpha3Values())
	comps := prev["runtimeConfig"].(map[string]any)["components"].(map[string]any)
	comps["scanner"].(map[string]any)["request"] = map[string]any{"cpu": "1000m", "mem": "500Mi"}
	comps["remover"].(map[string]any)["limit"] = map[string]any{"mem": "30Mi"}
	cfg, _ := managerConfig(t, render(t, Options{ReuseValues: prev}))
	c := cfg.Components
	got := sizes{c.Scanner.Request.CPU.String(), c.Scanner.Request.Mem.String(), c.Remover.Limit.Mem.String()}
	if diff := cmp.Diff(defaults, got); diff != "" {
		t.Errorf("--reuse-values: worker sizes (-want +got):\n%s", diff)
	}
}
