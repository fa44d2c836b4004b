//go:build linux

package e2e

import (
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

// node is the runtime a pipeline runs against, with what the pod spec
// gives the workers for it.
type node struct {
	rt       noderuntime.Node
	endpoint string
	// args are the runtime's own worker flags (CRI-O's image store).
	args []string
	// ctrd is the containerd, for tests that use its own tools.
	ctrd *testcontainerd.Containerd
}

// runtimes start each runtime the scanner reads, by name: subtests
// <runtime>/<case>, so -skip /crio/ leaves CRI-O out.
var runtimes = map[string]func(t *testing.T) *node{}

func init() {
	for _, rt := range noderuntime.Runtimes {
		runtimes[rt.Name] = func(t *testing.T) *node { return onRuntime(t, rt) }
	}
}

// onRuntime is a node as the pod spec of that runtime sees it: the scanner
// is told the runtime by ERASER_RUNTIME_NAME (the runtimes' names are the
// configuration's), and the workers get the runtime's own flags.
func onRuntime(t *testing.T, rt noderuntime.Runtime) *node {
	t.Helper()
	n := rt.Start(t, noderuntime.Options{})
	t.Setenv("ERASER_RUNTIME_NAME", rt.Name)
	return &node{rt: n, endpoint: n.CRIEndpoint(), args: rt.WorkerArgs(n)}
}

// onContainerd is a containerd node, with containerd's own tools at hand.
func onContainerd(t *testing.T) *node {
	t.Helper()
	c := testcontainerd.Start(t)
	return &node{rt: noderuntime.OfContainerd(c), endpoint: c.Endpoint, ctrd: c}
}
