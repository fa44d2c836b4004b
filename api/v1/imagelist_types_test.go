package v1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// The ImageList CRD's validation, and upstream's ImageList manifests
// applied as its users have them.

func TestImageListValidation(t *testing.T) {
	testenv.Require(t)
	many := func(n int, f func(int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	cases := map[string]struct {
		spec map[string]any
		// wantErr are substrings of the API server's message; none means accepted.
		wantErr []string
	}{
		"upstream sample": {spec: map[string]any{"images": []string{"docker.io/library/alpine:3.7.3", "nginx", "sha256:2834dc507516af02784808c5f48b7cbe38b8ed5d0f4837f16e78d00deb7e7767"}}},
		"prune all":       {spec: map[string]any{"images": []string{"*"}}},
		"digest ref":      {spec: map[string]any{"images": []string{"registry.example.com:5000/team/app@sha256:2834dc507516af02784808c5f48b7cbe38b8ed5d0f4837f16e78d00deb7e7767"}}},
		"10,000 entries": {spec: map[string]any{"images": many(10000, func(i int) string {
			return fmt.Sprintf("registry.example.com/team/application-%05d:v1.2.3", i)
		})}},
		"dry run": {spec: map[string]any{"images": []string{"*"}, "dryRun": true}},

		"missing spec":     {spec: nil, wantErr: []string{"spec", "Required value"}},
		"missing images":   {spec: map[string]any{}, wantErr: []string{"spec.images", "Required value"}},
		"empty images":     {spec: map[string]any{"images": []string{}}, wantErr: []string{"spec.images", "at least 1 items"}},
		"empty entry":      {spec: map[string]any{"images": []string{"nginx", ""}}, wantErr: []string{"spec.images[1]", "at least 1 chars"}},
		"blank entry":      {spec: map[string]any{"images": []string{" "}}, wantErr: []string{"spec.images[0]", "should match"}},
		"entry with space": {spec: map[string]any{"images": []string{"nginx latest"}}, wantErr: []string{"spec.images[0]", "should match"}},
		"entry too long":   {spec: map[string]any{"images": []string{strings.Repeat("a", 513)}}, wantErr: []string{"spec.images[0]", "more than 512"}},
		"too many entries": {spec: map[string]any{"images": many(20001, func(i int) string { return fmt.Sprintf("i%d", i) })},
			wantErr: []string{"spec.images", "at most 20000"}},
		"images not a list": {spec: map[string]any{"images": "nginx"}, wantErr: []string{"spec.images", "must be of type array"}},
		"dryRun not bool":   {spec: map[string]any{"images": []string{"*"}, "dryRun": "yes"}, wantErr: []string{"spec.dryRun", "must be of type boolean"}},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dc, _ := dynamicClient(t)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "eraser.sh/v1", "kind": "ImageList",
				"metadata": map[string]any{"name": fmt.Sprintf("validation-%d", i)},
			}}
			if tc.spec != nil {
				u.Object["spec"] = jsonRoundTrip(t, tc.spec)
			}
			res := dc.Resource(imageLists.WithVersion("v1"))
			_, err := res.Create(ctx, u, metav1.CreateOptions{})
			if err == nil {
				_ = res.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
			checkErr(t, err, tc.wantErr)
		})
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
	dir := filepath.Join(repo.Root(), "..", "shared", "reference", "upstream-data", "imagelists")
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
