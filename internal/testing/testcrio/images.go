//go:build linux

// How images reach CRI-O: built in Go by testimage.Image, pushed to a
// registry on loopback that this instance's registries.conf names as a
// mirror of their registries, and pulled through CRI.

package testcrio

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

// registryHandler is a registry that keeps held blobs back from GETs.
func registryHandler(h *holds) http.Handler {
	reg := testregistry.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			h.wait(r)
		}
		reg.ServeHTTP(w, r)
	})
}

// holds are the blobs the registry keeps back until released, to hold a
// pull in the middle.
type holds struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// wait blocks a download of a held blob until its release or the
// request's end.
func (h *holds) wait(r *http.Request) {
	_, digest, ok := strings.Cut(r.URL.Path, "/blobs/")
	if !ok {
		return
	}
	h.mu.Lock()
	ch := h.held[digest]
	h.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-r.Context().Done():
	}
}

// HoldBlob keeps the blob of digest from every download until release is
// called (the test's cleanup releases it too): a pull needing it waits in
// the middle, its other blobs served.
func (c *CRIO) HoldBlob(t testing.TB, digest string) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	c.holds.mu.Lock()
	if c.holds.held == nil {
		c.holds.held = map[string]chan struct{}{}
	}
	c.holds.held[digest] = ch
	c.holds.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release
}

// hostOf is the registry of a reference as containers/image names it
// (docker.io, not go-containerregistry's index.docker.io), which is the
// prefix registries.conf matches.
func hostOf(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ""
	}
	h := r.Context().RegistryStr()
	if h == name.DefaultRegistry {
		return "docker.io"
	}
	return h
}

// canonical is the reference as CRI-O records it: fully qualified, so
// "busybox:1" is "docker.io/library/busybox:1".
func canonical(ref string) (string, error) {
	r, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("%q is not a tag: %w", ref, err)
	}
	return hostOf(ref) + "/" + r.RepositoryStr() + ":" + r.TagStr(), nil
}

func (c *CRIO) mirror(host string) bool {
	if host == "" || c.mirrored[host] {
		return false
	}
	c.mirrored[host] = true
	return true
}

// registriesConf sends every mirrored host to the loopback registry, under a
// path named after the host so that two registries' "app:1" stay apart.
// No search registries: a short name would otherwise be tried against
// docker.io, which this machine cannot reach.
func (c *CRIO) registriesConf() string {
	hosts := make([]string, 0, len(c.mirrored))
	for h := range c.mirrored {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var b strings.Builder
	b.WriteString("unqualified-search-registries = []\nshort-name-mode = \"disabled\"\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "\n[[registry]]\nprefix = %q\nlocation = %q\n\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n",
			h, h, c.registry+"/"+h)
	}
	for _, h := range c.opts.insecure {
		fmt.Fprintf(&b, "\n[[registry]]\nlocation = %q\ninsecure = true\n", h)
	}
	return b.String()
}

// Import builds the images, pushes them to this instance's registry and pulls
// every tag through CRI, so CRI-O records them as it would a registry pull.
func (c *CRIO) Import(t testing.TB, images ...testimage.Image) {
	t.Helper()
	var built []Tagged
	for _, img := range images {
		b, err := img.Build()
		if err != nil {
			t.Fatal(err)
		}
		built = append(built, Tagged{Image: b, Tags: img.Tags})
	}
	c.ImportImages(t, built...)
}

// Tagged is an image already built, with the tags to give it.
type Tagged struct {
	Image v1.Image
	Tags  []string
}

// ImportImages is Import for images built some other way (with a creation
// time, say, which testimage.Image leaves at zero).
func (c *CRIO) ImportImages(t testing.TB, images ...Tagged) {
	t.Helper()
	for _, ref := range c.Publish(t, images...) {
		c.Pull(t, ref)
	}
}

// Publish pushes the images to this instance's registry, where CRI-O
// pulls them from, and returns their references as CRI-O names them; it
// pulls nothing.
func (c *CRIO) Publish(t testing.TB, images ...Tagged) []string {
	t.Helper()
	var pulls []string
	added := false
	for _, img := range images {
		for _, tag := range img.Tags {
			ref, err := canonical(tag)
			if err != nil {
				t.Fatal(err)
			}
			if err := testregistry.Push(c.registry, ref, img.Image); err != nil {
				t.Fatalf("pushing %s to the loopback registry: %v", tag, err)
			}
			added = c.mirror(hostOf(ref)) || added
			pulls = append(pulls, ref)
		}
	}
	// containers/image caches registries.conf; only a reload makes CRI-O
	// see a mirror for a registry host it has not seen before.
	if added {
		c.writeFile(t, "registries.conf", c.registriesConf())
		c.Reload(t)
	}
	return pulls
}

// Pull pulls ref through CRI and returns the image ID CRI-O gives it.
func (c *CRIO) Pull(t testing.TB, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v\n%s", ref, err, c.logTail(20))
	}
	return resp.GetImageRef()
}

// Reload makes CRI-O read its configuration files again (SIGHUP), as an
// operator changing pinned_images or registries.conf on a node would, and
// waits until it has.
func (c *CRIO) Reload(t testing.TB) {
	t.Helper()
	c.reloads++
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "crio.log"))
		if strings.Count(string(b), "Unable to reload configuration") > 0 {
			t.Fatalf("CRI-O could not reload its configuration:\n%s", c.logTail(20))
		}
		if strings.Count(string(b), "Configuration reload completed") >= c.reloads {
			return
		}
	}
	t.Fatalf("CRI-O did not reload its configuration within 30s:\n%s", c.logTail(20))
}

// SetPinnedImages rewrites pinned_images and reloads CRI-O.
func (c *CRIO) SetPinnedImages(t testing.TB, refs ...string) {
	t.Helper()
	c.opts.pinnedImages = refs
	c.writeFile(t, "crio.conf", c.config())
	c.Reload(t)
}
