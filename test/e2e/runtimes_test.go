//go:build linux

package e2e

import (
	"strings"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
)

// The worker scenarios as a table: each Test below that calls onEveryRuntime
// is a row, each noderuntime.Runtimes entry a column, run as subtest
// TestX/<runtime> (-run 'TestX/crio', -skip '/crio'). The seed is the same on
// every runtime but for what only some runtimes have (pinned_images), so
// the expectations are written once.

const (
	// createdImage is used by a container created and never started.
	createdImage = "example.com/created:1"
	// pinnedImage is pinned by the runtime's configuration, where it has one.
	pinnedImage = "example.com/pinned:1"
	// shortImage is listed by its short name, as a user writes it.
	shortImage = "docker.io/library/shortname:1"
	shortName  = "shortname:1"
)

// workerNode is a runtime seeded with the images every row uses: running,
// exited and created containers, excluded images, junk (one named by a
// short name), and an image pinned by configuration if the runtime pins.
type workerNode struct {
	noderuntime.Node
	rt  noderuntime.Runtime
	ids map[string]string // tag -> image ID
	// kept is what every automatic removal leaves on the node: excluded,
	// used by a container, pinned, and the sandbox image.
	kept map[string]bool
	// removable is how many images "*" removes with the exclusions: app
	// (two tags), junk a-d and the short-named one.
	removable int
}

// onEveryRuntime runs a row on every runtime with a freshly seeded node.
func onEveryRuntime(t *testing.T, row func(t *testing.T, n *workerNode)) {
	noderuntime.Each(t, func(t *testing.T, rt noderuntime.Runtime) { row(t, seedOn(t, rt, noderuntime.Options{})) })
}

func seedOn(t *testing.T, rt noderuntime.Runtime, o noderuntime.Options) *workerNode {
	t.Helper()
	junk := []string{shortImage}
	if rt.Pins {
		o.PinnedImages = append(o.PinnedImages, pinnedImage)
		junk = append(junk, pinnedImage)
	}
	n := rt.Start(t, o)
	n.Import(t, seedImages(t, []string{createdImage}, junk)...)
	n.RunContainer(t, "running", runImage)
	n.CreateContainer(t, "created", createdImage)
	pod, _ := n.RunContainer(t, "exited", exitedImage)
	n.StopPod(t, pod)
	kept := map[string]bool{keepExact: true, keepWildcard: true, runImage: true, exitedImage: true, createdImage: true, rt.SandboxImage: true}
	if rt.Pins {
		kept[pinnedImage] = true
	}
	return &workerNode{Node: n, rt: rt, ids: n.ImageIDs(t), kept: kept, removable: 6}
}

// present is the node's tags (not its repo digests or IDs: containerd's
// are "sha256:...", CRI-O's bare hex).
func (n *workerNode) present(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for ref, id := range n.ImageIDs(t) {
		if ref != id && !strings.Contains(ref, "@") && !strings.HasPrefix(ref, "sha256:") {
			out[ref] = true
		}
	}
	return out
}

// pinned are the images the runtime pins: the sandbox image, and
// pinnedImage where the runtime pins by configuration.
func (n *workerNode) pinned() []string {
	if n.rt.Pins {
		return []string{n.rt.SandboxImage, pinnedImage}
	}
	return []string{n.rt.SandboxImage}
}

// workerArgs are args with the runtime's own worker flags.
func (n *workerNode) workerArgs(args ...string) []string {
	return append(args, n.rt.WorkerArgs(n.Node)...)
}
