package release

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmregistry "helm.sh/helm/v4/pkg/registry"

	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

const testVersion = "1.2.3-rc.1"

// startRegistry serves an OCI registry on loopback until the test ends
// and returns its registry path for a release.
func startRegistry(t *testing.T) string {
	t.Helper()
	return testregistry.Start(t) + "/eraser"
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
	checkRendered(t, archive, reg, digests)
	checkArtifactHub(t, ch.Metadata.Annotations, reg, digests)

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

func TestCheck(t *testing.T) {
	ok := Options{Registry: "ghcr.io/owner/eraser", Version: "1.2.3", Signer: testSigner(t)}
	if err := Check(ok); err != nil {
		t.Errorf("%+v: %v", ok, err)
	}
	for _, reg := range []string{"127.0.0.1:5000/eraser", "127.3.4.5:80", "localhost:5000/x", "localhost/x", "[::1]:5000/eraser"} {
		if err := Check(Options{Registry: reg, Version: "1.2.3", Insecure: true}); err != nil {
			t.Errorf("insecure %s: %v", reg, err)
		}
	}
	bad := map[string]Options{
		"no registry":          {Version: "1.2.3"},
		"unsigned remote":      {Registry: "ghcr.io/o/e", Version: "1.2.3"},
		"no version":           {Registry: "ghcr.io/o/e"},
		"leading v":            {Registry: "ghcr.io/o/e", Version: "v1.2.3"},
		"not semver":           {Registry: "ghcr.io/o/e", Version: "1.2"},
		"build metadata":       {Registry: "ghcr.io/o/e", Version: "1.2.3+abc"},
		"no host":              {Registry: "owner/eraser", Version: "1.2.3"},
		"scheme":               {Registry: "https://ghcr.io/o/e", Version: "1.2.3"},
		"upper case":           {Registry: "ghcr.io/Owner/eraser", Version: "1.2.3"},
		"insecure remote":      {Registry: "ghcr.io/o/e", Version: "1.2.3", Insecure: true},
		"insecure private IP":  {Registry: "10.0.0.5:5000/e", Version: "1.2.3", Insecure: true},
		"insecure lookalike":   {Registry: "localhost.example.com/e", Version: "1.2.3", Insecure: true},
		"unknown platform":     {Registry: "ghcr.io/o/e", Version: "1.2.3", Platforms: []string{"linux/s390x"}},
		"platform of no image": {Registry: "ghcr.io/o/e", Version: "1.2.3", Platforms: []string{"windows/amd64"}},
	}
	// Each refused for its own reason: signed, but for the case that is
	// about signing.
	signer := testSigner(t)
	for name, o := range bad {
		if name != "unsigned remote" {
			o.Signer = signer
			bad[name] = o
		}
	}
	for name, o := range bad {
		if err := Check(o); err == nil {
			t.Errorf("%s (%+v): accepted", name, o)
		}
	}
	if err := Check(bad["unsigned remote"]); err == nil || !strings.Contains(err.Error(), "COSIGN_KEY") {
		t.Errorf("the refusal of an unsigned release does not say how to sign: %v", err)
	}
	if err := Check(bad["insecure remote"]); err == nil || !strings.Contains(err.Error(), "127.0.0.0/8, localhost, [::1]") {
		t.Errorf("insecure refusal does not say what is allowed: %v", err)
	}
}

// Plain HTTP to anything but this machine never leaves the process, even
// when a client library picks HTTP by itself.
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	rt := loopbackOnlyHTTP{next: failTransport{}}
	for _, u := range []string{"http://10.0.0.5:5000/v2/", "http://ghcr.io/v2/", "http://localhost.example.com/v2/"} {
		req := httptest.NewRequest("GET", u, nil)
		if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "refusing plain HTTP") {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:5000/v2/", "http://[::1]:5000/v2/", "http://localhost/v2/", "https://ghcr.io/v2/"} {
		req := httptest.NewRequest("GET", u, nil)
		if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "reached") {
			t.Errorf("%s: %v, want it let through", u, err)
		}
	}
}

type failTransport struct{}

func (failTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("reached %s", r.URL)
}
