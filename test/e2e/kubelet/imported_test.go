//go:build linux

package kubelet

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

// The tier puts its test images on the nodes with ctr images import, which
// records tags and no repository digest: the state of an image side-loaded
// onto an air-gapped node, which the automatic policies keep as not
// re-pullable (manager.retention.protectNotRepullable). importImages stands
// for a pull (the images it imports are the ones the scenarios expect "*",
// scheduled runs and disk pressure to remove); importUnpulled keeps the
// side-loaded state.

// importUnpulled builds the images and imports them into every node's
// runtime as ctr images import does: tags, no repository digest.
func importUnpulled(t *testing.T, nodes []Node, imgs []testcontainerd.Image) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := testcontainerd.WriteArchive(archive, imgs); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		ctrOn(t, n, "images", "import", archive)
	}
}

// addRepoDigests gives each tag the repository digest a pull from its
// registry records (repo@sha256:..., beside the tag in containerd's image
// store, which CRI reports as the image's repoDigests).
func addRepoDigests(t *testing.T, n Node, imgs []testcontainerd.Image) {
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

// removeImages removes the tags from the node and the repository digests
// importImages gave them, so that nothing keeps their content; what is not
// there is skipped.
func removeImages(t *testing.T, n Node, tags ...string) {
	t.Helper()
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
