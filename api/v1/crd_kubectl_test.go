package v1_test

// What kubectl shows of the CRDs: the printer columns, the short names and
// the category.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
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

// TestFreedColumn: kubectl get imagelists -o wide shows the space freed as
// the manager states it for people, the figure the per-node report gives,
// not the runtime's raw byte count, in both served versions.
func TestFreedColumn(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	list := builder.MakeImageList("freed-column").Images("*").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	list.Status.Results = &eraserv1.ImageResults{Removed: 3, BytesFreed: 1764346, ExpectedBytesFreed: 4 << 20, MeasuredBytesFreed: 4 << 20, Freed: "4.0MiB"}
	if err := env.Client.Status().Update(ctx, list); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"v1", "v1alpha1"} {
		t.Run(version, func(t *testing.T) {
			body, err := dc.RESTClient().Get().AbsPath("/apis/eraser.sh/"+version+"/imagelists/freed-column").
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var table metav1.Table
			if err := json.Unmarshal(body, &table); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			col := -1
			for i, c := range table.ColumnDefinitions {
				if c.Name == "Freed" {
					col = i
					if c.Type != "string" {
						t.Errorf("the Freed column is of type %s", c.Type)
					}
				}
			}
			if col < 0 || len(table.Rows) != 1 {
				t.Fatalf("no Freed column or not one row: %s", body)
			}
			if got := table.Rows[0].Cells[col]; got != "4.0MiB" {
				t.Errorf("Freed cell = %v, want 4.0MiB", got)
			}
		})
	}
}
