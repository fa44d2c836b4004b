package containerdconfig_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/containerdconfig"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

func TestNoRegistriesByDefault(t *testing.T) {
	if s := containerdconfig.TOML(containerdconfig.Options{Dir: "/d"}); strings.Contains(s, "registry") {
		t.Errorf("a registry section without PlainHTTPRegistries:\n%s", s)
	}
}

// Two private containerds run side by side (the worker packages' tests do,
// in parallel) and neither leaves a file in a host-wide directory: containerd
// 2 would otherwise bind NRI to /var/run/nri/nri.sock, and the second one
// would not start.
func TestTwoAtOnceShareNothingOnTheHost(t *testing.T) {
	testcontainerd.Require(t)
	const hostNRI = "/var/run/nri/nri.sock"
	_, err := os.Stat(hostNRI)
	hadNRI := err == nil
	for i, c := range []*testcontainerd.Containerd{testcontainerd.Start(t), testcontainerd.Start(t)} {
		if _, err := c.Runtime.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
			t.Errorf("containerd %d does not answer CRI: %v", i, err)
		}
	}
	if _, err := os.Stat(hostNRI); err == nil && !hadNRI {
		t.Errorf("a private containerd created %s on the host", hostNRI)
	}
}

// A real containerd configured with PlainHTTPRegistries pulls, through CRI
// as the kubelet does, from a registry on loopback that speaks plain HTTP.
func TestPullsFromPlainHTTPRegistry(t *testing.T) {
	testcontainerd.Require(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/e2e/pulled:1"
	push(t, srv.URL, "e2e/pulled", "1", img)
	c := testcontainerd.Start(t, testcontainerd.WithPlainHTTPRegistries(host))
	resp, err := c.Images.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	id, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ImageRef != id.String() {
		t.Errorf("pulled %s, want the image %s", resp.ImageRef, id)
	}
}

// push uploads img to the registry at base as repo:tag with the
// distribution API's monolithic uploads (go-containerregistry's remote
// package would pull docker's credential code into the module for this).
func push(t *testing.T, base, repo, tag string, img v1.Image) {
	t.Helper()
	do := func(method, url string, body []byte, mediaType string, want int) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if mediaType != "" {
			req.Header.Set("Content-Type", mediaType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s, want %d", method, url, resp.Status, want)
		}
		return resp
	}
	blob := func(digest v1.Hash, data []byte) {
		t.Helper()
		loc := do(http.MethodPost, base+"/v2/"+repo+"/blobs/uploads/", nil, "", http.StatusAccepted).Header.Get("Location")
		if !strings.HasPrefix(loc, "http") {
			loc = base + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		do(http.MethodPut, loc+sep+"digest="+digest.String(), data, "application/octet-stream", http.StatusCreated)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		blob(d, data)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	blob(cfgName, cfg)
	manifest, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	mt, err := img.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	do(http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", base, repo, tag), manifest, string(mt), http.StatusCreated)
}
