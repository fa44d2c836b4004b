package crdcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/testing/repo"
)

func repoRoot() string { return repo.Root() }

func readCRD(t *testing.T, path string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return crd
}

// upstreamChart is upstream's released chart v1.4.1, read in place beside
// the repository, never copied into it; a clone without it skips, saying
// so, as every test of upstream's own files does (TestLacks and the
// manager's TestHeldBackByCRDsThatLackFields check the same with the
// project's own CRDs stripped of fields).
func upstreamChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(repoRoot(), "..", "shared", "reference", "upstream-data", "helm", "chart-v1.4.1", "templates")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("upstream's chart v1.4.1 is not beside the repository (%v); TestLacks checked the project's stripped CRDs instead", err)
	}
	return dir
}

func needed(t *testing.T, name string) Need {
	t.Helper()
	for _, n := range Needs() {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no need for %s", name)
	return Need{}
}

// This release's CRDs keep everything the manager writes.
func TestLacksOurCRDs(t *testing.T) {
	for _, need := range Needs() {
		t.Run(need.Name, func(t *testing.T) {
			crd := readCRD(t, filepath.Join(repoRoot(), "config", "crd", "bases", "eraser.sh_"+strings.TrimSuffix(need.Name, ".eraser.sh")+".yaml"))
			if f, lacking := Lacks(crd, need); lacking {
				t.Errorf("config/crd/bases: %s", f)
			}
		})
	}
}

// Upstream's CRDs, as its chart installs them, lack the fields of this
// project's API: the manager names at least those its bookkeeping needs.
func TestLacksUpstreamCRDs(t *testing.T) {
	dir := upstreamChart(t)
	cases := map[string]struct {
		file string
		want []string
	}{
		"imagejobs.eraser.sh": {
			file: "imagejobs.eraser.sh-customresourcedefinition.yaml",
			want: []string{"status.started", "status.waiting", "status.waitingIndexes", "status.failedIndexes", "status.failedNodes", "status.report", "status.conditions", "status.results"},
		},
		"imagelists.eraser.sh": {
			file: "imagelists.eraser.sh-customresourcedefinition.yaml",
			want: []string{"spec.dryRun", "status.conditions", "status.results", "status.job"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, lacking := Lacks(readCRD(t, filepath.Join(dir, tc.file)), needed(t, name))
			if !lacking {
				t.Fatalf("upstream's %s lacks nothing the manager writes", name)
			}
			got := map[string]bool{}
			for _, m := range f.Missing {
				got[m] = true
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("upstream's %s: %s is not reported; got %v", name, w, f.Missing)
				}
			}
			for _, declared := range []string{"status.desired", "status.phase", "status.success", "spec.images"} {
				if got[declared] {
					t.Errorf("upstream's %s declares %s, reported missing", name, declared)
				}
			}
		})
	}
}

func TestLacks(t *testing.T) {
	need := Need{Name: "imagejobs.eraser.sh", Version: "v1", Fields: paths("status.desired", "status.started")}
	crd := func(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: versions}}
	}
	schema := func(props ...string) *apiextensionsv1.CustomResourceValidation {
		status := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, p := range props {
			status[p] = integer
		}
		s := object(map[string]apiextensionsv1.JSONSchemaProps{"status": object(status)})
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &s}
	}
	cases := map[string]struct {
		crd  *apiextensionsv1.CustomResourceDefinition
		want string
	}{
		"keeps every field":      {crd: crd(apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Schema: schema("desired", "started")})},
		"lacks one":              {crd: crd(apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Schema: schema("desired")}), want: "CRD imagejobs.eraser.sh (v1) lacks status.started"},
		"only another version":   {crd: crd(apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Served: true, Schema: schema("desired", "started")}), want: "CRD imagejobs.eraser.sh has no version v1"},
		"the version not served": {crd: crd(apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Schema: schema("desired", "started")}), want: "CRD imagejobs.eraser.sh does not serve v1"},
		"not installed":          {want: "CRD imagejobs.eraser.sh is not installed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if f, lacking := Lacks(tc.crd, need); lacking {
				got = f.String()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lacks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	got := Message([]Finding{
		{Name: "imagejobs.eraser.sh", Version: "v1", Missing: []string{"status.started", "status.report"}},
		{Name: "imagelists.eraser.sh", Problem: "is not installed"},
	}, "eraser-system")
	want := "CRD imagejobs.eraser.sh (v1) lacks status.started, status.report; CRD imagelists.eraser.sh is not installed: " +
		"the API server drops the fields a CRD does not declare, so the manager runs nothing until you install this release's CRDs: " +
		"with Helm, `helm upgrade <release> <chart> --namespace eraser-system --reuse-values --set crds.adopt=true --take-ownership --force-conflicts`; " +
		"with the static manifest, or when something else manages the CRDs (crds.install=false), " +
		"`kubectl apply --server-side --force-conflicts -f <the release's CRDs>` (docs/troubleshooting.md)"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Message (-want +got):\n%s", diff)
	}
}
