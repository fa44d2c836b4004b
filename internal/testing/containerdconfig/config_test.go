package containerdconfig_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/containerdconfig"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
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
	host := testregistry.Start(t)
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := host + "/e2e/pulled:1"
	if err := testregistry.Push(host, "e2e/pulled:1", img); err != nil {
		t.Fatal(err)
	}
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
