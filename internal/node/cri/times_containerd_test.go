//go:build linux

package cri_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// recordNames are the names containerd may keep a record under for one
// CRI image.
func recordNames(img cri.Image) []string {
	return append(append([]string{img.ID}, img.Tags...), img.Digests...)
}

func newest(times map[string]time.Time, img cri.Image) time.Time {
	var t time.Time
	for _, name := range recordNames(img) {
		if at := times[name]; at.After(t) {
			t = at
		}
	}
	return t
}

// imagesByRef indexes CRI's images by their tags and repo digests.
func imagesByRef(t *testing.T, c *cri.Client) map[string]cri.Image {
	t.Helper()
	images, err := c.ListImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cri.Image{}
	for _, img := range images {
		for _, ref := range append(slices.Clone(img.Tags), img.Digests...) {
			out[ref] = img
		}
	}
	return out
}

// settle waits until CRI lists every ref (tag or repo digest) and containerd has a record of every
// name of those images, and returns both. Images made with ctr reach CRI
// through containerd's events: the CRI plugin then adds the image-ID record
// and relabels the tag's, after ctr has returned.
func settle(t *testing.T, c *cri.Client, refs ...string) (map[string]cri.Image, map[string]time.Time) {
	t.Helper()
	var (
		byRef map[string]cri.Image
		times map[string]time.Time
	)
	wait.ForDetail(t, time.Minute, "containerd's records of every image CRI lists", func() (bool, string) {
		byRef = imagesByRef(t, c)
		var err error
		times, err = c.ImageTimes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, ref := range refs {
			img, ok := byRef[ref]
			if !ok {
				missing = append(missing, "CRI image "+ref)
				continue
			}
			for _, name := range recordNames(img) {
				if _, ok := times[name]; !ok {
					missing = append(missing, "record "+name)
				}
			}
		}
		return len(missing) == 0, fmt.Sprintf("still missing %v; containerd has %v", missing, times)
	})
	return byRef, times
}

// TestImageTimes: containerd's own records, read beside CRI on the same
// connection, date every image CRI lists, by its ID and by each of its names,
// and a new name moves the image's newest time forward.
func TestImageTimes(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	c := ctrd.Client(t)

	// containerd stores nanoseconds, but allow for a coarse clock.
	before := time.Now().Add(-time.Second)
	ctrd.ImportUnpulled(t, // no repository digest yet: AddRepoDigest below adds one
		testimage.Image{Tags: []string{"example.com/app:1", "example.com/app:latest"}, RandomBytes: 1024},
		testimage.Image{Tags: []string{"example.com/other:1"}, RandomBytes: 1024},
	)
	tags := []string{"example.com/app:1", "example.com/app:latest", "example.com/other:1", testcontainerd.SandboxImage}
	// Interleaved with CRI calls on the same connection, which the raw codec
	// must not reach.
	byRef, times := settle(t, c, tags...)
	after := time.Now().Add(time.Second)
	for _, tag := range tags {
		for _, name := range recordNames(byRef[tag]) {
			at := times[name]
			if tag == testcontainerd.SandboxImage {
				// Imported by Start, before this test's window.
				if at.After(after) {
					t.Errorf("%s: %v, after the test's imports", name, at)
				}
				continue
			}
			if at.Before(before) || at.After(after) {
				t.Errorf("%s: %v, outside the import's window %v .. %v", name, at, before, after)
			}
		}
	}

	// A new name, as a pull of the same image under another tag or a
	// registry's digest records, counts as a fresh arrival.
	app, other := byRef["example.com/app:1"], byRef["example.com/other:1"]
	appWas, otherWas := newest(times, app), newest(times, other)
	time.Sleep(20 * time.Millisecond)
	retagged := time.Now()
	digest := ctrd.AddRepoDigest(t, "example.com/app:1")
	ctrd.Ctr(t, "images", "tag", "example.com/other:1", "example.com/other:2")

	byRef, times = settle(t, c, "example.com/app:1", digest, "example.com/other:2")
	app, other = byRef["example.com/app:1"], byRef["example.com/other:2"]
	if at := times[digest]; at.Before(retagged.Add(-time.Second)) {
		t.Errorf("repo digest %s: %v; want a time from the re-tag (%v)", digest, at, retagged)
	}
	if now := newest(times, app); !now.After(appWas) {
		t.Errorf("app: newest %v after adding %s, was %v; want later", now, digest, appWas)
	}
	if now := newest(times, other); !now.After(otherWas) {
		t.Errorf("other: newest %v after tagging other:2, was %v; want later", now, otherWas)
	}
}

// TestImageFsMountpoints: the filesystem containerd names for its images can
// be measured where it says it is.
func TestImageFsMountpoints(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	c := ctrd.Client(t)
	mps, err := c.ImageFsMountpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) == 0 {
		t.Fatal("containerd named no image filesystem")
	}
	whole, err := diskusage.Stat(ctrd.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		if !strings.HasPrefix(mp, ctrd.Dir+string(filepath.Separator)) {
			t.Errorf("mountpoint %s is not under the private containerd's root %s", mp, ctrd.Dir)
		}
		u, err := diskusage.Stat(mp)
		if err != nil {
			t.Fatal(err)
		}
		// Same filesystem as containerd's directory.
		if u.Capacity == 0 || u.Capacity != whole.Capacity || u.Available > u.Capacity {
			t.Errorf("Stat(%s) = %+v; containerd's directory is on %+v", mp, u, whole)
		}
	}
}

// criOnly serves CRI's Version and nothing of containerd's own API, as CRI-O.
type criOnly struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (criOnly) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "cri-o", RuntimeVersion: "1.30.0"}, nil
}

func TestImageTimesNotServed(t *testing.T) {
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := serveRuntime(t, dir, func(srv *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(srv, criOnly{}) })

	c, err := cri.Dial(context.Background(), "unix://"+sock, cri.Timeouts{Connect: 5 * time.Second, List: 5 * time.Second, Remove: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if times, err := c.ImageTimes(context.Background()); !errors.Is(err, cri.ErrNoImageTimes) {
		t.Errorf("ImageTimes = %v, %v; want ErrNoImageTimes", times, err)
	}
}
