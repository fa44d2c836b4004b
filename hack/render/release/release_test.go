package release

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"

	"github.com/eraser-oss/eraser/hack/render"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

const testVersion = "1.2.3-rc.1"

// startRegistry serves go-containerregistry's OCI registry (in memory) on
// a loopback port and returns its registry path for a release.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host + "/eraser"
}

// isolate keeps the host's docker and Helm credentials and caches out.
func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, "docker"))
	t.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(home, "helm", "registry.json"))
	t.Setenv("HELM_REPOSITORY_CACHE", filepath.Join(home, "helm", "cache"))
	t.Setenv("HELM_CONTENT_CACHE", filepath.Join(home, "helm", "content"))
	t.Setenv("HELM_REPOSITORY_CONFIG", filepath.Join(home, "helm", "repositories.yaml"))
	return filepath.Join(home, "helm", "registry.json")
}

// writeLayouts writes, for every image of Images, an OCI layout shaped as
// hack/ocibuild writes it (index.json -> one annotated multi-platform
// index) with a tiny image per platform, named for registry and version.
// It returns the indexes' digests. With only, just those platforms (as
// make images PLATFORMS=... writes them).
func writeLayouts(t *testing.T, dir, registry, version string, only ...string) map[string]v1.Hash {
	t.Helper()
	digests := map[string]v1.Hash{}
	for _, im := range Images {
		var adds []mutate.IndexAddendum
		for _, p := range im.Platforms {
			if len(only) > 0 && !slices.Contains(only, p) {
				continue
			}
			goos, goarch, _ := strings.Cut(p, "/")
			layer := static.NewLayer([]byte(im.Name+" for "+p), types.OCILayer)
			img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture = goos, goarch
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		lp, err := layout.Write(filepath.Join(dir, im.Name), empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			annotationRefName:       version,
			annotationContainerName: ImageRef(registry, im.Repo, version),
		})); err != nil {
			t.Fatal(err)
		}
		if digests[im.Name], err = idx.Digest(); err != nil {
			t.Fatal(err)
		}
	}
	return digests
}

func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "charts", "eraser"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func options(t *testing.T, reg, images, helmConfig string) Options {
	return Options{
		Registry: reg, Version: testVersion, ImagesDir: images, ChartDir: chartDir(t),
		Insecure: true, Epoch: time.Unix(0, 0).UTC(), Keychain: authn.DefaultKeychain,
		HelmRegistryConfig: helmConfig, Out: testWriter{t},
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A release into a real registry on loopback: every image is one index
// with its platforms under REGISTRY/<repo>:VERSION, the chart comes back
// from oci://REGISTRY/charts/eraser:VERSION stamped and naming those
// images, and releasing again changes nothing.
func TestReleaseToLoopbackRegistry(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	digests := writeLayouts(t, images, reg, testVersion)
	o := options(t, reg, images, helmConfig)

	first, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Images) != len(Images) {
		t.Fatalf("pushed %d images, want %d", len(first.Images), len(Images))
	}
	for i, im := range Images {
		p := first.Images[i]
		want := ImageRef(reg, im.Repo, testVersion)
		if p.Ref != want || p.Digest != digests[im.Name].String() || p.Unchanged {
			t.Errorf("image %s: pushed %+v, want %s@%s newly pushed", im.Name, p, want, digests[im.Name])
		}
		checkRemoteIndex(t, want, digests[im.Name], im.Platforms)
	}
	if first.Chart.Ref != ChartRef(reg, testVersion) || first.Chart.Digest == "" || first.Chart.Unchanged {
		t.Errorf("chart: %+v", first.Chart)
	}

	// Pulled back with Helm's registry client: stamped and pointing at
	// the images.
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptCredentialsFile(helmConfig))
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(ChartRef(reg, testVersion))
	if err != nil {
		t.Fatal(err)
	}
	if pulled.Manifest.Digest != first.Chart.Digest {
		t.Errorf("chart manifest %s, the release printed %s", pulled.Manifest.Digest, first.Chart.Digest)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != testVersion || ch.Metadata.AppVersion != testVersion {
		t.Errorf("chart version %q appVersion %q, want %s", ch.Metadata.Version, ch.Metadata.AppVersion, testVersion)
	}
	archive := filepath.Join(t.TempDir(), "eraser.tgz")
	if err := os.WriteFile(archive, pulled.Chart.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	checkRendered(t, archive, reg)

	// Again: every reference is left as it was.
	second, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("second release: %v", err)
	}
	for i, p := range second.Images {
		if !p.Unchanged || p.Digest != first.Images[i].Digest {
			t.Errorf("second release of %s: %+v, want unchanged %s", p.Ref, p, first.Images[i].Digest)
		}
	}
	if !second.Chart.Unchanged || second.Chart.Digest != first.Chart.Digest {
		t.Errorf("second release of the chart: %+v, want unchanged %s", second.Chart, first.Chart.Digest)
	}

	// Other content under a published version is refused, and replaced
	// only when asked to.
	o.Epoch = time.Unix(1767225600, 0).UTC()
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("a different chart under the same version: %v, want a refusal", err)
	}
	o.Overwrite = true
	third, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if third.Chart.Unchanged || third.Chart.Digest == first.Chart.Digest {
		t.Errorf("-overwrite: chart %+v, want a new digest", third.Chart)
	}
}

// checkRemoteIndex reads ref back from the registry: one index of the
// given digest whose manifests are the platforms, each pullable.
func checkRemoteIndex(t *testing.T, ref string, digest v1.Hash, platforms []string) {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	if got, _ := idx.Digest(); got != digest {
		t.Errorf("%s: index %s, want %s", ref, got, digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		if _, err := remote.Image(tag.Digest(d.Digest.String())); err != nil {
			t.Errorf("%s %s: %v", ref, d.Platform, err)
		}
	}
	if !slices.Equal(got, platforms) {
		t.Errorf("%s: platforms %v, want %v", ref, got, platforms)
	}
}

// checkRendered renders the chart at path with no values, as helm install
// would, and checks that the manifests name the release's images.
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
