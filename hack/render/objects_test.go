package render

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	erasescheme "github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/testing/crdwait"
	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

func repoPath(parts ...string) string {
	return filepath.Join(append([]string{repo.Root()}, parts...)...)
}

func chartDir() string { return repoPath("charts", "eraser") }

// ownUpstreamValues are the project's values files shaped like upstream's
// (written from upstream's documented keys, in internal/wire/config's testdata):
// the chart is checked against them on every run.
func ownUpstreamValues(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(repoPath("internal", "wire", "config", "testdata", "upstream", "values-*.yaml"))
	if len(files) == 0 {
		t.Fatal("no upstream-shaped values files in internal/wire/config/testdata/upstream")
	}
	return files
}

// upstreamValuesIfPresent are upstream's own values files, read in place
// from the reference data beside the repository, where it exists.
func upstreamValuesIfPresent() []string {
	files, _ := filepath.Glob(upstreamValuesGlob())
	return files
}

func upstreamValuesGlob() string {
	return filepath.Join(repo.Root(), "..", "shared", "reference", "upstream-data", "helm", "*.yaml")
}

// upstreamHelmValues skips the test, saying so, without them.
func upstreamHelmValues(t *testing.T) []string {
	t.Helper()
	files := upstreamValuesIfPresent()
	if len(files) == 0 {
		t.Skipf("upstream's own Helm values are not at %s; TestChartUpstreamShapedValues checked the project's fixtures instead", upstreamValuesGlob())
	}
	return files
}

// objects is a rendered stream, decoded.
type objects []*unstructured.Unstructured

func decode(t *testing.T, stream string) objects {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var out objects
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered YAML: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// kubeVersion is the control plane's (hack/build-control-plane.sh): Helm
// stands a test binary for Kubernetes 1.20, older than the chart allows.
const kubeVersion = "v1.37.2"

func render(t *testing.T, o Options) objects {
	t.Helper()
	if o.KubeVersion == "" {
		o.KubeVersion = kubeVersion
	}
	out, err := Chart(chartDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func staticManifest(t *testing.T) objects {
	t.Helper()
	data, err := os.ReadFile(repoPath("deploy", "eraser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(data))
}

// find is the one rendered object of kind and name, or nil.
func find(objs objects, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// get converts the one object of kind and name into a typed object.
func get[T any](t *testing.T, objs objects, kind, name string) *T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return nil
}

// warnings collects what the API server warns about (deprecated fields,
// unknown fields, Pod Security): a clean manifest draws none.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

func applyClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	w := &warnings{}
	cfg.WarningHandlerWithContext = w
	scheme, err := erasescheme.New()
	if err == nil {
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// apply server-side applies the objects as `kubectl apply --server-side`
// would. CRDs and namespaces are applied for real first, as the rest needs
// them to validate; the rest for real or as a dry run. It fails on any
// refusal or warning.
func apply(t *testing.T, objs objects, dryRun bool) {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	c, warn := applyClient(t)
	foundation := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "Namespace"
	}
	for _, first := range []bool{true, false} {
		var crds []string
		for _, u := range objs {
			if foundation(u) != first {
				continue
			}
			opts := []client.ApplyOption{client.FieldOwner("eraser-install-test"), client.ForceOwnership}
			if dryRun && !first {
				opts = append(opts, client.DryRunAll)
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), opts...); err != nil {
				t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
			}
			if w := warn.take(); len(w) > 0 {
				t.Errorf("applying %s %s drew warnings: %q", u.GetKind(), u.GetName(), w)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, u.GetName())
			}
		}
		crdwait.Established(t, c, time.Minute, crds...)
	}
}
