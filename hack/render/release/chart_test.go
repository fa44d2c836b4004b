package release

// The released chart: pulled back from the registry, it installs and renders
// with the release's images.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/cli"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/hack/render"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/images"
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
// would, and checks that the manifests run the release's images, each by
// the digest the release pushed (digests, by image name).
func checkRendered(t *testing.T, path, reg string, digests map[string]v1.Hash) {
	t.Helper()
	checkRenderedWith(t, path, reg, digests, render.Options{})
}

func checkRenderedWith(t *testing.T, path, reg string, digests map[string]v1.Hash, o render.Options) {
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
	pinned := func(im images.Image) string {
		return ImageRef(reg, im.Repo, testVersion) + "@" + digests[im.Name].String()
	}
	if want := pinned(images.Manager); managerImage != want {
		t.Errorf("manager image %q, want %s", managerImage, want)
	}
	if cfg == nil {
		t.Fatal("no EraserConfig rendered")
	}
	for _, w := range []struct {
		im  images.Image
		got string
	}{
		{images.Collector, cfg.Components.Collector.Image.Ref()},
		{images.Scanner, cfg.Components.Scanner.Image.Ref()},
		{images.Remover, cfg.Components.Remover.Image.Ref()},
	} {
		if want := pinned(w.im); w.got != want {
			t.Errorf("%s image %s, want %s", w.im.Name, w.got, want)
		}
	}
}

// helm install oci://REGISTRY/charts/eraser --version VERSION, with no
// values file: Helm's install action finds the chart in the registry, and
// it renders with the release's images.
func TestInstallFromRegistry(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	digests := writeLayouts(t, images, reg, testVersion)
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
	checkRendered(t, path, reg, digests)

	// The render tool pulls it the same way (go -C hack/render run
	// ./cmd/chart --plain-http --version VERSION oci://...), as the
	// kubelet tier installs it.
	checkRenderedWith(t, "oci://"+reg+"/"+ChartRepo, reg, digests, render.Options{Version: testVersion, PlainHTTP: true})
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

// checkArtifactHub parses the chart's Artifact Hub annotations as Artifact
// Hub does: the images, pinned to the pushed digests, the license, links
// and the prerelease flag of the test's version.
func checkArtifactHub(t *testing.T, ann map[string]string, reg string, digests map[string]v1.Hash) {
	t.Helper()
	var imgs []ahImage
	if err := yaml.UnmarshalStrict([]byte(ann[ahImages]), &imgs); err != nil {
		t.Fatalf("%s: %v\n%s", ahImages, err, ann[ahImages])
	}
	var want []ahImage
	for _, im := range Images {
		want = append(want, ahImage{Name: im.Repo, Image: ImageRef(reg, im.Repo, testVersion) + "@" + digests[im.Name].String(), Platforms: im.Platforms})
	}
	if diff := cmp.Diff(want, imgs); diff != "" {
		t.Errorf("%s (-want +got):\n%s", ahImages, diff)
	}
	for _, im := range imgs {
		if _, err := name.NewDigest(im.Image); err != nil {
			t.Errorf("%s: %s is not a reference with a digest: %v", ahImages, im.Image, err)
		}
	}
	var links []ahLink
	if err := yaml.UnmarshalStrict([]byte(ann[ahLinks]), &links); err != nil || len(links) == 0 {
		t.Errorf("%s: %v %v", ahLinks, links, err)
	}
	for _, l := range links {
		if u, err := url.Parse(l.URL); err != nil || u.Scheme != "https" || l.Name == "" {
			t.Errorf("%s: %+v", ahLinks, l)
		}
	}
	for k, v := range map[string]string{ahLicense: "Apache-2.0", ahPrerelease: "true", ahContainsSecurityUpdates: "false", ahOperator: "true"} {
		if ann[k] != v {
			t.Errorf("%s: %q, want %q", k, ann[k], v)
		}
	}
}

// A released chart runs every image by the digest the release pushed,
// wherever imageRegistry moves it; an image given another tag runs by
// that tag.
func TestReleasedChartPinsDigests(t *testing.T) {
	digests := map[string]string{}
	for i, im := range Images {
		digests[im.Repo] = fmt.Sprintf("sha256:%064x", i+1)
	}
	data, err := Package(chartDir(t), Options{Registry: userRegistry, Version: userVersion, Epoch: time.Unix(0, 0), Digests: digests})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "eraser.tgz")
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const mirror = "mirror.internal/eraser"
	pin := func(reg, repo string) string { return ImageRef(reg, repo, userVersion) + "@" + digests[repo] }
	cases := map[string]struct {
		set  []string
		want []string
	}{
		"no values": {
			want: []string{pin(userRegistry, "collector"), pin(userRegistry, "eraser-manager"), pin(userRegistry, "eraser-trivy-scanner"), pin(userRegistry, "remover")},
		},
		"imageRegistry": {
			set:  []string{"imageRegistry=" + mirror},
			want: []string{pin(mirror, "collector"), pin(mirror, "eraser-manager"), pin(mirror, "eraser-trivy-scanner"), pin(mirror, "remover")},
		},
		"another tag given": {
			set:  []string{"runtimeConfig.components.collector.image.tag=1.0.0"},
			want: []string{userRegistry + "/collector:1.0.0", pin(userRegistry, "eraser-manager"), pin(userRegistry, "eraser-trivy-scanner"), pin(userRegistry, "remover")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, archive, tc.set)
			builtFor(t, userRegistry, userVersion)
			if diff := cmp.Diff(tc.want, installedImages(t, objs)); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}
