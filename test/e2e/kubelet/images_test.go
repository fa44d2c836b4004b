//go:build linux

package kubelet

// The tier's test images: named, built, pushed to its registry, put on the
// nodes' runtimes, and read back from them through CRI or ctr.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

// Test images are example.com/e2e/NAME:1, each with its own ID.
func testImage(name string) string { return "example.com/e2e/" + name + ":1" }

// seedImages are images each with its own content (so its own ID).
func seedImages(t *testing.T, tags ...string) []testimage.Image {
	t.Helper()
	pause := testimage.Pause(t)
	var imgs []testimage.Image
	for _, tag := range tags {
		imgs = append(imgs, testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: 64 << 10})
	}
	return imgs
}

// pushImages pushes the images (tags crioImage names) to the tier's
// registry.
func pushImages(t *testing.T, imgs ...testimage.Image) {
	t.Helper()
	host := strings.TrimSuffix(registryPath, "/eraser")
	for _, img := range imgs {
		built, err := img.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range img.Tags {
			if err := testregistry.Push(host, strings.TrimPrefix(tag, host+"/"), built); err != nil {
				t.Fatalf("pushing %s: %v", tag, err)
			}
		}
	}
}

// The tier puts its test images on the nodes with ctr images import, which
// records tags and no repository digest: the state of an image side-loaded
// onto an air-gapped node, which the automatic policies keep as not
// re-pullable (manager.retention.protectNotRepullable). importImages stands
// for a pull (the images it imports are the ones the scenarios expect "*",
// scheduled runs and disk pressure to remove); importUnpulled keeps the
// side-loaded state.

// seed imports images, each with its own content (so its own ID), into the
// nodes' runtimes.
func seed(t *testing.T, nodes []Node, tags ...string) {
	t.Helper()
	importImages(t, nodes, seedImages(t, tags...))
	for _, n := range nodes {
		expectImages(t, n, tags, nil)
	}
}

// importImages builds the images and imports them into every node's
// runtime as pulled images: with the repository digest of a pull, which the
// automatic policies may remove (importUnpulled does not give it).
func importImages(t *testing.T, nodes []Node, imgs []testimage.Image) {
	t.Helper()
	importUnpulled(t, nodes, imgs)
	for _, n := range nodes {
		addRepoDigests(t, n, imgs)
	}
}

// importUnpulled builds the images and imports them into every node's
// runtime as ctr images import does: tags, no repository digest.
func importUnpulled(t *testing.T, nodes []Node, imgs []testimage.Image) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := testimage.WriteArchive(archive, imgs); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		ctrOn(t, n, "images", "import", archive)
	}
}

// addRepoDigests gives each tag the repository digest a pull from its
// registry records (repo@sha256:..., beside the tag in containerd's image
// store, which CRI reports as the image's repoDigests).
func addRepoDigests(t *testing.T, n Node, imgs []testimage.Image) {
	t.Helper()
	listed := ctrDigests(t, n)
	for _, img := range imgs {
		for _, tag := range img.Tags {
			dig, ok := listed[tag]
			if !ok {
				t.Fatalf("%s: imported %s, and ctr images ls does not list it", n.Name, tag)
			}
			// --force: a tag imported again with the same content has its
			// digest reference already.
			ctrOn(t, n, "images", "tag", "--force", tag, repoOf(tag)+"@"+dig)
		}
	}
}

// seedAlpine imports alpineImages(musl) on the nodes.
func seedAlpine(t *testing.T, nodes []Node, musl map[string]string) {
	t.Helper()
	importImages(t, nodes, alpineImages(musl))
}

// removeImages removes the tags from the node and the repository digests
// importImages gave them, then the record containerd's CRI keeps of each
// image under its ID once no name of it is left, so that nothing keeps
// their content and no later run finds them; what is not there is skipped.
func removeImages(t *testing.T, n Node, tags ...string) {
	t.Helper()
	ctx := testCtx(t)
	c := criClient(t, n)
	named := map[string]bool{}
	for _, tag := range tags {
		named[tag] = true
	}
	ids := map[string]bool{}
	imgs, err := c.ListImages(ctx)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			if named[tag] {
				ids[img.ID] = true
			}
		}
	}
	listed := ctrDigests(t, n)
	var refs []string
	for _, tag := range tags {
		if dig, ok := listed[tag]; ok {
			refs = append(refs, tag, repoOf(tag)+"@"+dig)
		}
	}
	if len(refs) > 0 {
		args := append([]string{"--address", n.Socket, "--namespace", "k8s.io", "images", "rm"}, refs...)
		// A digest reference a pull never made is not there: rm skips it.
		_, _ = command(repoRoot(), "ctr", args...).CombinedOutput()
	}
	if imgs, err = c.ListImages(ctx); err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	for _, img := range imgs {
		if ids[img.ID] && len(img.Tags) == 0 && len(img.Digests) == 0 {
			if err := c.RemoveImage(ctx, img.ID); err != nil {
				t.Errorf("%s: removing %s, left without a name: %v", n.Name, img.ID, err)
			}
		}
	}
}

func criClient(t *testing.T, n Node) *cri.Client {
	t.Helper()
	c, err := cri.Dial(testCtx(t), "unix://"+n.Socket, cri.DefaultTimeouts)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeImages lists the tags and repository digests on the node, asking its
// runtime directly; an image of the release held by digest is listed by its
// tag too.
func nodeImages(t *testing.T, n Node) map[string]bool {
	t.Helper()
	imgs, err := criClient(t, n).ListImages(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	out := map[string]bool{}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			out[tag] = true
		}
		// An image pulled by digest, as the released chart's are, is
		// listed by its repository digest alone: one of the release's
		// counts as its tag too.
		for _, d := range img.Digests {
			out[d] = true
			for repo, dig := range releasedDigests {
				if d == registryPath+"/"+repo+"@"+dig {
					out[eraserImage(repo)] = true
				}
			}
		}
	}
	return out
}

func nodeContainers(t *testing.T, n Node) []cri.Container {
	t.Helper()
	cs, err := criClient(t, n).ListContainers(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return cs
}

func expectImages(t *testing.T, n Node, present, absent []string) {
	t.Helper()
	have := nodeImages(t, n)
	for _, img := range present {
		if !have[img] {
			t.Errorf("%s: %s was removed; want it kept", n.Name, img)
		}
	}
	for _, img := range absent {
		if have[img] {
			t.Errorf("%s: %s is still there; want it removed", n.Name, img)
		}
	}
}

// goneFromEveryNode waits until no node has the image.
func goneFromEveryNode(t *testing.T, timeout time.Duration, what, image string) {
	t.Helper()
	eventually(t, timeout, what, func() (bool, string) {
		var left []string
		for _, n := range cluster.Nodes {
			if nodeImages(t, n)[image] {
				left = append(left, n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("still on %v", left)
	})
}

// ctrDigests is the node's image references (as ctr lists them) → the
// digest of their manifest.
func ctrDigests(t *testing.T, n Node) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(ctrOn(t, n, "images", "ls"), "\n") {
		// REF TYPE DIGEST SIZE PLATFORMS LABELS
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[2], "sha256:") {
			out[f[0]] = f[2]
		}
	}
	return out
}

// repoOf is a tag's repository: the tier's tags name their registry and
// tag in full (host[:port]/path:tag).
func repoOf(tag string) string { return tag[:strings.LastIndex(tag, ":")] }

// ctrOn runs ctr against the node's containerd, in the k8s.io namespace
// the kubelet's images live in.
func ctrOn(t *testing.T, n Node, args ...string) string {
	t.Helper()
	out, err := command(repoRoot(), "ctr", append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: ctr %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
