//go:build linux

// Package testcri is what a test does through a runtime's CRI socket
// whichever runtime answers it: pods, containers, the image list, and the
// tier check and teardown every runtime's test instance shares.
// testcontainerd's Containerd and testcrio's CRIO embed CRI, so each
// operation exists once.
package testcri

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
)

// CRI is a test's connection to a private runtime's CRI socket.
type CRI struct {
	Socket   string
	Endpoint string
	Runtime  runtimeapi.RuntimeServiceClient
	Images   runtimeapi.ImageServiceClient

	conn *grpc.ClientConn
	o    Options
}

// Options are what differs between runtimes in the operations CRI
// shares.
type Options struct {
	// Pod is the sandbox and the container's Linux config of a pod named
	// name, as the runtime needs them (namespaces, cgroup parent, logs).
	Pod func(name string) (*runtimeapi.PodSandboxConfig, *runtimeapi.LinuxContainerConfig)
	// LogTail is the end of the runtime's log, for failure messages.
	LogTail func() string
	// DigestsInIDs lists repo digests in ImageIDs beside tags and IDs.
	DigestsInIDs bool
}

// Dial connects to the CRI socket (a path); the caller's stop calls
// Close.
func Dial(socket string, o Options) (*CRI, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", socket, err)
	}
	return &CRI{
		Socket: socket, Endpoint: "unix://" + socket, conn: conn, o: o,
		Runtime: runtimeapi.NewRuntimeServiceClient(conn), Images: runtimeapi.NewImageServiceClient(conn),
	}, nil
}

// PullImage pulls ref through CRI, as a pod's kubelet does, and returns
// the image ID the runtime gives it.
func (c *CRI) PullImage(t testing.TB, ref string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("PullImage %s: %v\n%s", ref, err, c.logTail())
	}
	return resp.GetImageRef()
}

// CRIEndpoint is the runtime's endpoint as a worker's --runtime-endpoint
// takes it.
func (c *CRI) CRIEndpoint() string { return c.Endpoint }

// Close removes every pod (the runtime's shims or conmons outlive it
// otherwise) and closes the connection.
func (c *CRI) Close() {
	if c == nil || c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if pods, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
		for _, p := range pods.GetItems() {
			_, _ = c.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.GetId()})
			_, _ = c.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.GetId()})
		}
	}
	_ = c.conn.Close()
}

func (c *CRI) logTail() string {
	if c.o.LogTail == nil {
		return ""
	}
	return c.o.LogTail()
}

// Client is our own CRI client connected to this runtime.
func (c *CRI) Client(t testing.TB) *cri.Client {
	t.Helper()
	client, err := cri.Dial(context.Background(), c.Endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// RunContainer starts a pod (host network, no CNI needed) with one
// container from image running the image's entrypoint, and returns the
// pod's and the container's IDs. It stays until the test ends or StopPod.
func (c *CRI) RunContainer(t testing.TB, name, image string) (podID, containerID string) {
	t.Helper()
	podID, containerID = c.CreateContainer(t, name, image)
	if _, err := c.Runtime.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: containerID}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, c.logTail())
	}
	return podID, containerID
}

// CreateContainer is RunContainer without the start: the container stays
// created, as one whose pod is still starting.
func (c *CRI) CreateContainer(t testing.TB, name, image string) (podID, containerID string) {
	t.Helper()
	return c.createContainer(t, name, image, nil)
}

// createContainer is CreateContainer with the container's mounts.
func (c *CRI) createContainer(t testing.TB, name, image string, mounts []*runtimeapi.Mount) (podID, containerID string) {
	t.Helper()
	podID, containerID, err := c.tryCreateContainer(name, image, mounts)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.logTail())
	}
	return podID, containerID
}

// tryCreateContainer is createContainer returning its error; a pod whose
// container the runtime refused is removed again.
func (c *CRI) tryCreateContainer(name, image string, mounts []*runtimeapi.Mount) (podID, containerID string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sandboxCfg, linux := c.o.Pod(name)
	sb, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg})
	if err != nil {
		return "", "", fmt.Errorf("RunPodSandbox: %w", err)
	}
	ctr, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: sandboxCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			// CRI-O checks the signature policy against the name the
			// user asked for, which the kubelet passes here; without it
			// CRI-O's CreateContainer fails.
			Image:   &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image},
			LogPath: name + ".log",
			Linux:   linux,
			Mounts:  mounts,
		},
	})
	if err != nil {
		_, _ = c.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
		_, _ = c.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
		return "", "", fmt.Errorf("CreateContainer %s: %w", image, err)
	}
	return sb.GetPodSandboxId(), ctr.GetContainerId(), nil
}

// StopPod stops a pod's containers (they stay listed, exited).
func (c *CRI) StopPod(t testing.TB, podID string) {
	t.Helper()
	if _, err := c.Runtime.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}

// RemovePod stops and removes a pod with its containers, as the kubelet's
// garbage collection does once a pod is gone.
func (c *CRI) RemovePod(t testing.TB, podID string) {
	t.Helper()
	c.StopPod(t, podID)
	if _, err := c.Runtime.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}

// ImageIDs lists the IDs of the runtime's images by tag and by ID (and by
// repo digest, with DigestsInIDs).
func (c *CRI) ImageIDs(t testing.TB) map[string]string {
	t.Helper()
	resp, err := c.Images.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, img := range resp.GetImages() {
		refs := img.GetRepoTags()
		if c.o.DigestsInIDs {
			refs = append(refs, img.GetRepoDigests()...)
		}
		for _, ref := range refs {
			out[ref] = img.GetId()
		}
		out[img.GetId()] = img.GetId()
	}
	return out
}

// RepoDigest is the repository digest (name@sha256:...) the runtime shows
// for the image tagged tag, as a pull records it: what a user lists to name
// it by digest.
func (c *CRI) RepoDigest(t testing.TB, tag string) string {
	t.Helper()
	resp, err := c.Images.ImageStatus(context.Background(), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: tag}})
	if err != nil {
		t.Fatalf("image status of %s: %v", tag, err)
	}
	if resp.GetImage() == nil || len(resp.GetImage().GetRepoDigests()) == 0 {
		t.Fatalf("the runtime has no repo digest for %s", tag)
	}
	return resp.GetImage().GetRepoDigests()[0]
}

// WorkerTier is why a test that needs a real runtime skips under -short.
const WorkerTier = "worker tier: needs a real containerd/CRI-O; run make test-runtimes"

// RequireRuntime skips under -short (the unit tier), and when something in
// missing is, skips or, under CI, fails with hint: what a test of runtime
// needs to run.
func RequireRuntime(t testing.TB, runtime string, missing []string, hint string) {
	t.Helper()
	if testing.Short() {
		t.Skip(WorkerTier)
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("real %s tests need %v; %s", runtime, missing, hint)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// MountsUnder lists the mounts on dir and under it, in mount order.
func MountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && (f[1] == dir || strings.HasPrefix(f[1], dir+"/")) {
			out = append(out, f[1])
		}
	}
	return out
}

// UnmountUnder unmounts dir and everything under it. Deepest (latest)
// first, a few rounds: an overlay store mounts its own directory and each
// container's rootfs inside it; namespaces are bind mounts.
func UnmountUnder(dir string) {
	for range 3 {
		m := MountsUnder(dir)
		if len(m) == 0 {
			return
		}
		for i := len(m) - 1; i >= 0; i-- {
			_ = syscall.Unmount(m[i], syscall.MNT_DETACH)
		}
	}
}
