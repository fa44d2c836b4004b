package release

// What a release refuses and checks: another build's layouts, a subset
// of the platforms, the check of a published release, plain HTTP beyond
// loopback.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Layouts built for another registry or version, or without every
// platform, are refused before anything is pushed.
func TestReleaseRefusesOtherBuilds(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	cases := map[string]func(dir string){
		"other registry": func(dir string) { writeLayouts(t, dir, "example.test/eraser", testVersion) },
		"other version":  func(dir string) { writeLayouts(t, dir, reg, "1.0.0") },
		"missing": func(dir string) {
			writeLayouts(t, dir, reg, testVersion)
			if err := os.RemoveAll(filepath.Join(dir, "remover")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir)
			_, err := Run(context.Background(), options(t, reg, dir, helmConfig))
			if err == nil || !strings.Contains(err.Error(), "make images REGISTRY="+reg+" VERSION="+testVersion) {
				t.Errorf("got %v, want a refusal that says how to build", err)
			}
		})
	}
	// A chart that does not package stops the release before any push.
	t.Run("no chart", func(t *testing.T) {
		dir := t.TempDir()
		writeLayouts(t, dir, reg, testVersion)
		o := options(t, reg, dir, helmConfig)
		o.ChartDir = filepath.Join(dir, "no-chart")
		if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "loading chart") {
			t.Errorf("got %v, want the chart's error", err)
		}
	})
	// Nothing reached the registry.
	repo, _ := name.NewRepository(reg+"/remover", name.Insecure)
	if tags, err := remote.List(repo); err == nil && len(tags) > 0 {
		t.Errorf("refused releases pushed %v", tags)
	}
}

// A partial release (-platforms, for tests and local use) pushes each
// index with the listed platforms, and refuses layouts that hold more or
// fewer; without -platforms, the same layouts are refused.
func TestReleasePlatformSubset(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	digests := writeLayouts(t, images, reg, testVersion, "linux/amd64")
	o := options(t, reg, images, helmConfig)
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "a release needs") {
		t.Fatalf("a linux/amd64-only build released as a full release: %v", err)
	}
	o.Platforms = []string{"linux/amd64", "linux/arm64"}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "a release needs") {
		t.Fatalf("a linux/amd64-only build released for linux/arm64 too: %v", err)
	}
	o.Platforms = []string{"linux/amd64"}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for i, im := range Images {
		p := res.Images[i]
		want := ImageRef(reg, im.Repo, testVersion)
		if p.Ref != want || p.Digest != digests[im.Name].String() || !slices.Equal(p.Platforms, []string{"linux/amd64"}) {
			t.Errorf("image %s: pushed %+v, want %s@%s for linux/amd64", im.Name, p, want, digests[im.Name])
		}
		checkRemoteIndex(t, want, digests[im.Name], []string{"linux/amd64"})
	}
}

func TestCheck(t *testing.T) {
	ok := Options{Registry: "ghcr.io/owner/eraser", Version: "1.2.3"}
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
	for name, o := range bad {
		if err := Check(o); err == nil {
			t.Errorf("%s (%+v): accepted", name, o)
		}
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
