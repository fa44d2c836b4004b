//go:build linux

// Package noderuntime runs a test on every real container runtime a node
// can have: a scenario written once against Node runs as one subtest per
// runtime (TestX/containerd, TestX/crio), so -run and -skip pick runtimes,
// and a new runtime is one more entry in Runtimes.
//
// The runtimes themselves are testcontainerd's and testcrio's private
// instances; which containerd runs is testcontainerd's choice (Debian's, or
// CONTAINERD_BIN_DIR's build), which CRI-O testcrio's (CRIO_BIN_DIR, or
// hack/build-crio.sh's cache). Under -short their Start skips, naming the
// worker tier.
package noderuntime

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testcri"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// Node is a running private runtime, as a test drives it.
type Node interface {
	// CRIEndpoint is what a worker's --runtime-endpoint takes.
	CRIEndpoint() string
	// RootDir is the image filesystem: the directory the runtime keeps its
	// image store in.
	RootDir() string
	// Client is our own CRI client connected to the runtime.
	Client(testing.TB) *cri.Client
	// Import puts the images on the node as a registry pull would, each
	// with a repo digest.
	Import(testing.TB, ...testimage.Image)
	// SideLoad puts the images on the node as a provisioning tool loads
	// ones no registry holds: they cannot be pulled back.
	SideLoad(testing.TB, ...testimage.Image)
	RunContainer(t testing.TB, name, image string) (podID, containerID string)
	CreateContainer(t testing.TB, name, image string) (podID, containerID string)
	// RunContainerMounting, CreateContainerMounting and
	// TryCreateContainerMounting start containers that mount images as
	// volumes, as a pod's volumes[].image; ContainerMounts is what the
	// runtime's status shows of a container's mounts.
	RunContainerMounting(t testing.TB, name, image string, volumes ...testcri.ImageVolume) (podID, containerID string)
	CreateContainerMounting(t testing.TB, name, image string, volumes ...testcri.ImageVolume) (podID, containerID string)
	TryCreateContainerMounting(t testing.TB, name, image string, volumes ...testcri.ImageVolume) error
	ContainerMounts(t testing.TB, containerID string) []*runtimeapi.Mount
	StopPod(t testing.TB, podID string)
	RemovePod(t testing.TB, podID string)
	// ImageIDs maps each image's tags and ID (CRI-O's repo digests too)
	// to its ID.
	ImageIDs(testing.TB) map[string]string
	// RepoDigest is the repo digest (name@sha256:...) the runtime shows for
	// a tag.
	RepoDigest(t testing.TB, tag string) string
	// PullImage pulls a reference through CRI, as a pod's kubelet does,
	// and returns the image ID.
	PullImage(t testing.TB, ref string) string
}

// Options are how a test wants its node.
type Options struct {
	// SmallDiskMiB puts the image filesystem on a tmpfs of that size
	// (times Runtime.LayerCopies, so the same images fill the same share).
	SmallDiskMiB int
	// PinnedImages are pinned by the runtime's configuration; only a
	// runtime with Pins takes them.
	PinnedImages []string
	// PlainHTTPRegistries are registries (host:port) the runtime pulls
	// from in plain HTTP, as from a loopback registry a test serves.
	PlainHTTPRegistries []string
}

// Runtime is one column of a scenario table.
type Runtime struct {
	// Name is the subtest's name.
	Name string
	// Pins says the runtime pins images its configuration names.
	Pins bool
	// LayerCopies is how many copies of a layer the image store keeps
	// (containerd: the blob and its snapshot).
	LayerCopies int
	// SandboxImage is the pause image the runtime is configured with.
	SandboxImage string
	start        func(t *testing.T, o Options) Node
	workerArgs   func(Node) []string
}

// Start starts a private instance of the runtime, stopped by the test's
// cleanup.
func (r Runtime) Start(t *testing.T, o Options) Node {
	t.Helper()
	if len(o.PinnedImages) > 0 && !r.Pins {
		t.Fatalf("%s pins no images by configuration", r.Name)
	}
	o.SmallDiskMiB *= r.LayerCopies
	return r.start(t, o)
}

// WorkerArgs are the runtime's own flags a worker pod gets on a node of
// this runtime, beside --runtime-endpoint.
func (r Runtime) WorkerArgs(n Node) []string { return r.workerArgs(n) }

// Runtimes are the columns: every runtime a scenario runs on.
var Runtimes = []Runtime{
	{
		Name: "containerd", LayerCopies: 2, SandboxImage: testcontainerd.SandboxImage,
		start: func(t *testing.T, o Options) Node {
			t.Helper()
			var opts []testcontainerd.Option
			if o.SmallDiskMiB > 0 {
				opts = append(opts, testcontainerd.WithSmallDisk(o.SmallDiskMiB))
			}
			if len(o.PlainHTTPRegistries) > 0 {
				opts = append(opts, testcontainerd.WithPlainHTTPRegistries(o.PlainHTTPRegistries...))
			}
			return containerd{testcontainerd.Start(t, opts...)}
		},
		workerArgs: func(Node) []string { return nil },
	},
	{
		Name: "crio", Pins: true, LayerCopies: 1, SandboxImage: testcrio.SandboxImage,
		start: func(t *testing.T, o Options) Node {
			t.Helper()
			var opts []testcrio.Option
			if o.SmallDiskMiB > 0 {
				opts = append(opts, testcrio.WithSmallDisk(o.SmallDiskMiB))
			}
			if len(o.PinnedImages) > 0 {
				opts = append(opts, testcrio.WithPinnedImages(o.PinnedImages...))
			}
			if len(o.PlainHTTPRegistries) > 0 {
				opts = append(opts, testcrio.WithInsecureRegistries(o.PlainHTTPRegistries...))
			}
			return crio{testcrio.Start(t, opts...)}
		},
		// The pod spec on CRI-O: its CRI tells no pull times, its image
		// store does.
		workerArgs: func(n Node) []string { return []string{"--image-store=" + n.RootDir()} },
	},
}

// Each runs test on every runtime, as subtest <runtime>.
func Each(t *testing.T, test func(t *testing.T, rt Runtime)) {
	t.Helper()
	for _, rt := range Runtimes {
		t.Run(rt.Name, func(t *testing.T) { test(t, rt) })
	}
}

// EachNode is Each with a node of each runtime started with o.
func EachNode(t *testing.T, o Options, test func(t *testing.T, rt Runtime, n Node)) {
	t.Helper()
	Each(t, func(t *testing.T, rt Runtime) { test(t, rt, rt.Start(t, o)) })
}

// On runs test on the one runtime named name, as subtest <name>, for a
// scenario only that runtime has: the subtest name keeps -run and -skip
// working as for Each.
func On(t *testing.T, name string, test func(t *testing.T, rt Runtime)) {
	t.Helper()
	for _, rt := range Runtimes {
		if rt.Name == name {
			t.Run(rt.Name, func(t *testing.T) { test(t, rt) })
			return
		}
	}
	t.Fatalf("no runtime %q", name)
}

// OfContainerd is c as a Node, for a test that also uses containerd's own
// tools on it.
func OfContainerd(c *testcontainerd.Containerd) Node { return containerd{c} }

type containerd struct{ *testcontainerd.Containerd }

// SideLoad imports as "ctr images import" does: tags and an ID, no repo
// digest.
func (c containerd) SideLoad(t testing.TB, images ...testimage.Image) {
	c.ImportUnpulled(t, images...)
}

type crio struct{ *testcrio.CRIO }

// SideLoad pulls, as CRI-O has no import; CRI-O then shows the repo
// digests it makes up for every image, so only a name under localhost/
// (podman load's and buildah's) marks one no registry holds.
func (c crio) SideLoad(t testing.TB, images ...testimage.Image) {
	t.Helper()
	for _, img := range images {
		for _, tag := range img.Tags {
			if !strings.HasPrefix(tag, "localhost/") {
				t.Fatalf("a side-loaded image on CRI-O is named under localhost/, not %s", tag)
			}
		}
	}
	c.Import(t, images...)
}
