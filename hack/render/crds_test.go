package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The crds values decide which CRDs the chart renders and whether uninstall
// keeps them; a rendered CRD's spec is controller-gen's, unchanged by the
// template's round trip through fromYaml and toYaml. (With no cluster to
// look up, as here, every CRD is the release's to render;
// hack/render/helmtier covers the lookups on a real API server.)
func TestChartCRDs(t *testing.T) {
	type crd struct {
		Keep      bool
		Component string
	}
	cases := map[string]struct {
		set  []string
		want map[string]crd
	}{
		"defaults": {want: map[string]crd{
			"imagejobs.eraser.sh":  {Keep: true, Component: "api"},
			"imagelists.eraser.sh": {Keep: true, Component: "api"},
		}},
		"crds.keep=false": {set: []string{"crds.keep=false"}, want: map[string]crd{
			"imagejobs.eraser.sh":  {Component: "api"},
			"imagelists.eraser.sh": {Component: "api"},
		}},
		"crds.install=false": {set: []string{"crds.install=false"}, want: map[string]crd{}},
		"crds.adopt=true": {set: []string{"crds.adopt=true"}, want: map[string]crd{
			"imagejobs.eraser.sh":  {Keep: true, Component: "api"},
			"imagelists.eraser.sh": {Keep: true, Component: "api"},
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]crd{}
			for _, u := range render(t, Options{Set: tc.set}) {
				if u.GetKind() != "CustomResourceDefinition" {
					continue
				}
				got[u.GetName()] = crd{
					Keep:      u.GetAnnotations()["helm.sh/resource-policy"] == "keep",
					Component: u.GetLabels()["app.kubernetes.io/component"],
				}
				var rendered apiextensionsv1.CustomResourceDefinition
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rendered); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(generatedCRD(t, u.GetName()).Spec, rendered.Spec); diff != "" {
					t.Errorf("CRD %s as rendered differs from controller-gen's (-generated +rendered):\n%s", u.GetName(), diff)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CRDs (-want +got):\n%s", diff)
			}
		})
	}
}

// generatedCRD is controller-gen's CRD named name, as make manifests wrote
// it into config/crd/bases.
func generatedCRD(t *testing.T, name string) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, _ := filepath.Glob(repoPath("config", "crd", "bases", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if crd.Name == name {
			return crd
		}
	}
	t.Fatalf("no CRD %s in config/crd/bases", name)
	return apiextensionsv1.CustomResourceDefinition{}
}
