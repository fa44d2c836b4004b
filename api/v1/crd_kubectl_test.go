package v1_test

// What kubectl shows of the CRDs, and upstream's ImageList manifests
// applied as its users have them.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestPrinterColumns asks for the Table view kubectl prints.
func TestPrinterColumns(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	list := builder.MakeImageList("printer").Images("*").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	cases := map[string]struct {
		path string
		want []string
	}{
		"imagelists": {"/apis/eraser.sh/v1/imagelists", []string{"Name", "Status", "Behind", "Success", "Failed", "Skipped", "Removed", "Freed", "Dry-Run", "Last-Run", "Age"}},
		"imagejobs":  {"/apis/eraser.sh/v1/imagejobs", []string{"Name", "Phase", "Started", "Waiting", "Behind", "Desired", "Succeeded", "Failed", "Skipped", "Trigger", "ImageList", "Removed", "Delete-After", "Age"}},
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body, err := dc.RESTClient().Get().AbsPath(tc.path).
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var table metav1.Table
			if err := json.Unmarshal(body, &table); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var got []string
			for _, c := range table.ColumnDefinitions {
				got = append(got, c.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("columns (-want +got):\n%s", diff)
			}
		})
	}
}

// TestShortNamesAndCategory: "kubectl get il,ij" and "kubectl get eraser"
// resolve, through discovery as kubectl reads it.
func TestShortNamesAndCategory(t *testing.T) {
	testenv.Require(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resources, err := dc.ServerResourcesForGroupVersion("eraser.sh/v1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2][]string{}
	for _, r := range resources.APIResources {
		if !strings.Contains(r.Name, "/") {
			got[r.Name] = [2][]string{r.ShortNames, r.Categories}
		}
	}
	want := map[string][2][]string{
		"imagelists": {{"il"}, {"eraser"}},
		"imagejobs":  {{"ij"}, {"eraser"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("short names and categories (-want +got):\n%s", diff)
	}
}

// TestUpstreamShapedImageLists applies the project's ImageLists shaped like
// upstream's e2e suite's, on every run, and reads each back as v1.
func TestUpstreamShapedImageLists(t *testing.T) {
	testenv.Require(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "upstream-imagelists", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no ImageLists in testdata/upstream-imagelists")
	}
	applyImageLists(t, files)
}

// TestUpstreamImageLists applies the ImageList manifests of upstream Eraser's
// e2e suite, read in place from the shared reference data where it exists.
func TestUpstreamImageLists(t *testing.T) {
	testenv.Require(t)
	dir := filepath.Join(testenv.RepoRoot(), "..", "shared", "reference", "upstream-data", "imagelists")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Skipf("upstream's own ImageLists are not at %s; TestUpstreamShapedImageLists applied the project's instead", dir)
	}
	applyImageLists(t, files)
}

// applyImageLists creates each manifest in the version it was written in,
// checks that v1 reads the same images, and deletes it.
func applyImageLists(t *testing.T, files []string) {
	t.Helper()
	dc, _ := dynamicClient(t)
	ctx := context.Background()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &u.Object); err != nil {
				t.Fatal(err)
			}
			gv, _ := schema.ParseGroupVersion(u.GetAPIVersion())
			res := dc.Resource(imageLists.WithVersion(gv.Version))
			if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("upstream-shaped manifest refused: %v", err)
			}
			defer func() {
				if err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
					t.Error(err)
				}
			}()
			got, err := dc.Resource(imageLists.WithVersion("v1")).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "images")
			images, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "images")
			if diff := cmp.Diff(want, images); diff != "" {
				t.Errorf("spec.images read as v1 (-want +got):\n%s", diff)
			}
		})
	}
}

func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted, want an error mentioning %q", want)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("error is not Invalid: %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
