package v1_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

var (
	imageLists = schema.GroupResource{Group: "eraser.sh", Resource: "imagelists"}
	imageJobs  = schema.GroupResource{Group: "eraser.sh", Resource: "imagejobs"}
)

// warnings collects the Warning headers the API server sends.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func dynamicClient(t *testing.T) (*dynamic.DynamicClient, *warnings) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, w
}

func toUnstructured(t *testing.T, obj runtime.Object, version string) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("eraser.sh/" + version)
	return u
}

func TestCRDVersions(t *testing.T) {
	testenv.Require(t)
	for _, name := range []string{"imagelists.eraser.sh", "imagejobs.eraser.sh"} {
		t.Run(name, func(t *testing.T) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &crd); err != nil {
				t.Fatal(err)
			}
			type version struct {
				Name                  string
				Served, Storage, Depr bool
				HasStatus, HasSchema  bool
				Columns               int
			}
			var got []version
			for _, v := range crd.Spec.Versions {
				got = append(got, version{v.Name, v.Served, v.Storage, v.Deprecated,
					v.Subresources != nil && v.Subresources.Status != nil, v.Schema != nil, len(v.AdditionalPrinterColumns)})
			}
			cols := len(crd.Spec.Versions[0].AdditionalPrinterColumns)
			want := []version{
				{"v1", true, true, false, true, true, cols},
				{"v1alpha1", true, false, true, true, true, cols},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
			if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
				t.Errorf("scope = %s, want Cluster", crd.Spec.Scope)
			}
			if diff := cmp.Diff(crd.Spec.Versions[0].Schema, crd.Spec.Versions[1].Schema); diff != "" {
				t.Errorf("v1alpha1 schema differs from v1 (-v1 +v1alpha1):\n%s", diff)
			}
		})
	}
}

// TestRoundTrip writes objects, status included, in one version and reads
// them back in the other: with the same schema and no conversion webhook the
// API server must return identical content.
func TestRoundTrip(t *testing.T) {
	testenv.Require(t)
	ts := metav1.Unix(1_800_000_000, 0)
	cases := map[string]struct {
		resource    schema.GroupResource
		obj         client.Object
		write, read string
	}{
		"ImageList v1alpha1 -> v1": {
			resource: imageLists, write: "v1alpha1", read: "v1",
			obj: builder.MakeImageList("rt-list-a").Images("docker.io/library/nginx:latest", "nginx", "*").DryRun(true).
				Counts(3, 1, 2).Timestamp(ts).Results(eraserv1.ImageResults{Removed: 4, BytesFreed: 1 << 20, Freed: "1.0MiB"}).
				Condition(metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionTrue, Reason: eraserv1.ReasonSucceeded, Message: "ok"}).Obj(),
		},
		"ImageList v1 -> v1alpha1": {
			resource: imageLists, write: "v1", read: "v1alpha1",
			obj: builder.MakeImageList("rt-list-b").Images("sha256:2834dc507516af02784808c5f48b7cbe38b8ed5d0f4837f16e78d00deb7e7767").Counts(1, 0, 0).Timestamp(ts).Obj(),
		},
		"ImageJob v1alpha1 -> v1": {
			resource: imageJobs, write: "v1alpha1", read: "v1",
			obj: builder.MakeImageJob("rt-job-a").Phase(eraserv1.PhaseFailed).Counts(10, 7, 2, 1).DeleteAfter(ts).
				FailedNode("node-1", "Timeout", "pod did not finish in 10m").Obj(),
		},
		"ImageJob v1 -> v1alpha1": {
			resource: imageJobs, write: "v1", read: "v1alpha1",
			obj: builder.MakeImageJob("rt-job-b").Phase(eraserv1.PhaseCompleted).Counts(2, 2, 0, 0).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dc, warn := dynamicClient(t)
			writeRes := dc.Resource(tc.resource.WithVersion(tc.write))
			in := toUnstructured(t, tc.obj, tc.write)
			status := in.Object["status"]
			created, err := writeRes.Create(ctx, in, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create in %s: %v", tc.write, err)
			}
			t.Cleanup(func() { _ = writeRes.Delete(ctx, in.GetName(), metav1.DeleteOptions{}) })
			created.Object["status"] = status
			written, err := writeRes.UpdateStatus(ctx, created, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("status update in %s: %v", tc.write, err)
			}
			read, err := dc.Resource(tc.resource.WithVersion(tc.read)).Get(ctx, in.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get in %s: %v", tc.read, err)
			}
			if got := read.GetAPIVersion(); got != "eraser.sh/"+tc.read {
				t.Errorf("apiVersion = %s", got)
			}
			for _, key := range []string{"spec", "status", "metadata"} {
				if diff := cmp.Diff(written.Object[key], read.Object[key]); diff != "" {
					t.Errorf("%s differs between %s and %s (-written +read):\n%s", key, tc.write, tc.read, diff)
				}
			}
			if tc.write == "v1alpha1" || tc.read == "v1alpha1" {
				if !strings.Contains(strings.Join(warn.msgs, "\n"), "eraser.sh/v1alpha1") {
					t.Errorf("no deprecation warning for v1alpha1, got %q", warn.msgs)
				}
			}
		})
	}
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
