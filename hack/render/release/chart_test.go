package release

// The released chart: pulled back from the registry, it installs and renders
// with the release's images.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/hack/render"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "charts", "eraser"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkRendered renders the chart at path with no values, as helm install
// would, and checks that the manifests run the release's images.
func checkRendered(t *testing.T, path, reg string) {
	t.Helper()
	checkRenderedWith(t, path, reg, render.Options{})
}

func checkRenderedWith(t *testing.T, path, reg string, o render.Options) {
	t.Helper()
	// Helm stands a test binary for Kubernetes 1.20, older than the chart
	// allows: render for the one the module's client-go is.
	o.KubeVersion = "v1.37.2"
	out, err := render.Chart(path, o)
	if err != nil {
		t.Fatal(err)
	}
	// The workers the EraserConfig leaves out are the defaults of the
	// release's manager, built for reg at testVersion.
	builtFor(t, reg, testVersion)
	var managerImage string
	var cfg *config.Config
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var obj struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
			Spec     struct {
				Template struct {
					Spec struct{ Containers []struct{ Image string } }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		switch {
		case obj.Kind == "Deployment" && obj.Metadata.Name == "eraser-controller-manager":
			managerImage = obj.Spec.Template.Spec.Containers[0].Image
		case obj.Kind == "ConfigMap" && obj.Metadata.Name == "eraser-manager-config":
			var warnings []string
			cfg, warnings, err = config.Parse([]byte(obj.Data["controller_manager_config.yaml"]))
			if err != nil || len(warnings) > 0 {
				t.Fatalf("rendered EraserConfig: %v %v", err, warnings)
			}
		}
	}
	if want := ImageRef(reg, "eraser-manager", testVersion); managerImage != want {
		t.Errorf("manager image %q, want %s", managerImage, want)
	}
	if cfg == nil {
		t.Fatal("no EraserConfig rendered")
	}
	if got, want := cfg.Components.Collector.Image.Ref(), ImageRef(reg, "collector", testVersion); got != want {
		t.Errorf("collector image %s, want %s", got, want)
	}
	if got, want := cfg.Components.Scanner.Image.Ref(), ImageRef(reg, "eraser-trivy-scanner", testVersion); got != want {
		t.Errorf("scanner image %s, want %s", got, want)
	}
}

// helm install oci://REGISTRY/charts/eraser --version VERSION, with no
// values file: Helm's install action finds the chart in the registry, and
// it renders with the release's images.
func TestInstallFromRegistry(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	writeLayouts(t, images, reg, testVersion)
	if _, err := Run(context.Background(), options(t, reg, images, helmConfig)); err != nil {
		t.Fatal(err)
	}

	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(helmConfig))
	if err != nil {
		t.Fatal(err)
	}
	settings := cli.New()
	install := action.NewInstall(&action.Configuration{RegistryClient: client})
	install.Version = testVersion
	install.PlainHTTP = true
	path, err := install.LocateChart("oci://"+reg+"/"+ChartRepo, settings)
	if err != nil {
		t.Fatal(err)
	}
	checkRendered(t, path, reg)

	// The render tool pulls it the same way (go -C hack/render run
	// ./cmd/chart --plain-http --version VERSION oci://...), as the
	// kubelet tier installs it.
	checkRenderedWith(t, "oci://"+reg+"/"+ChartRepo, reg, render.Options{Version: testVersion, PlainHTTP: true})
	for _, bad := range []struct {
		src string
		o   render.Options
	}{
		{"oci://" + reg + "/" + ChartRepo, render.Options{PlainHTTP: true}},
		{"oci://" + reg + "/" + ChartRepo + ":" + testVersion, render.Options{Version: testVersion, PlainHTTP: true}},
		{"oci://10.0.0.5:5000/eraser/" + ChartRepo, render.Options{Version: testVersion, PlainHTTP: true}},
		{chartDir(t), render.Options{Version: testVersion}},
	} {
		if _, err := render.Chart(bad.src, bad.o); err == nil {
			t.Errorf("render.Chart(%s, %+v): no error", bad.src, bad.o)
		}
	}
}
