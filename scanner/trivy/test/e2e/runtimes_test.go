//go:build linux

package e2e

import (
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
)

// node is the runtime a pipeline runs against, with what the pod spec
// gives the workers for it.
type node struct {
	rt interface {
		Import(t testing.TB, images ...testcontainerd.Image)
		RunContainer(t testing.TB, name, image string) (podID, containerID string)
		ImageIDs(t testing.TB) map[string]string
	}
	endpoint string
	// args are the runtime's own worker flags (CRI-O's image store).
	args []string
	// ctrd is the containerd, for tests that use its own tools.
	ctrd *testcontainerd.Containerd
}

// runtimes start each runtime the scanner reads.
var runtimes = map[string]func(t *testing.T) *node{
	"containerd": onContainerd,
	"crio":       onCRIO,
}

func onContainerd(t *testing.T) *node {
	t.Helper()
	testcontainerd.Require(t)
	c := testcontainerd.Start(t)
	return &node{rt: c, endpoint: c.Endpoint, ctrd: c}
}

// onCRIO is a CRI-O node as the pod spec of runtime crio sees it: the
// scanner is told the runtime by ERASER_RUNTIME_NAME and reads the image
// store at --image-store, the remover reads image ages there.
func onCRIO(t *testing.T) *node {
	t.Helper()
	testcrio.Require(t)
	c := testcrio.Start(t)
	t.Setenv("ERASER_RUNTIME_NAME", "crio")
	return &node{rt: c, endpoint: c.Endpoint, args: []string{"--image-store=" + c.RootDir()}}
}
