//go:build linux

// How images reach a running containerd: ctr's import, and the repo
// digests a pull would record.

package testcontainerd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// Import builds the images and imports them into the k8s.io namespace,
// each with the repository digest a pull from a registry records: the state
// of a node's images that are pulled, re-pullable (protect.Repullable).
func (c *Containerd) Import(t testing.TB, images ...testimage.Image) {
	t.Helper()
	c.ImportUnpulled(t, images...)
	listed := c.digests(t)
	for _, img := range images {
		for _, tag := range img.Tags {
			c.tagByDigest(t, listed, normalTag(tag))
		}
	}
}

// digests is the namespace's image references, as ctr lists them, → the
// digest of their manifest.
func (c *Containerd) digests(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(c.Ctr(t, "images", "ls"), "\n") {
		// REF TYPE DIGEST SIZE PLATFORMS LABELS
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[2], "sha256:") {
			out[f[0]] = f[2]
		}
	}
	return out
}

// tagByDigest adds the repo@digest reference of a listed tag unless it is
// there (two tags of one repository and content share it), records it in
// listed, and returns it.
func (c *Containerd) tagByDigest(t testing.TB, listed map[string]string, tag string) string {
	t.Helper()
	dig, ok := listed[tag]
	if !ok {
		t.Fatalf("no image %s in ctr images ls", tag)
	}
	ref := tag[:strings.LastIndex(tag, ":")] + "@" + dig
	if _, ok := listed[ref]; !ok {
		c.Ctr(t, "images", "tag", tag, ref)
		listed[ref] = dig
	}
	return ref
}

// normalTag is the name ctr lists an imported tag by.
func normalTag(tag string) string {
	r, err := imageref.Parse(tag)
	if err != nil || r.Kind != imageref.KindTagged {
		return tag
	}
	return r.String()
}

// ImportUnpulled imports the images as "ctr images import" does: tags and an
// ID, no repository digest, as images side-loaded onto an air-gapped node.
func (c *Containerd) ImportUnpulled(t testing.TB, images ...testimage.Image) {
	t.Helper()
	archive := filepath.Join(c.Dir, fmt.Sprintf("import-%d.tar", time.Now().UnixNano()))
	if err := testimage.WriteArchive(archive, images); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(archive)
	c.Ctr(t, "images", "import", archive)
}

// Ctr runs ctr against this containerd in namespace k8s.io.
func (c *Containerd) Ctr(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"--address", c.Socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// AddRepoDigest gives a tagged image the repo digest a registry pull would
// have recorded (ImportUnpulled's images have none; Import's have it
// already) and returns it, "repo@sha256:...".
func (c *Containerd) AddRepoDigest(t testing.TB, tag string) string {
	t.Helper()
	return c.tagByDigest(t, c.digests(t), tag)
}
