//go:build linux

// What a test does with a running CRI-O: its CRI client, containers and
// pods. The names and behaviour follow testcontainerd's, so a test can be
// written once for both runtimes.

package testcrio

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
)

// Client is our own CRI client connected to this CRI-O.
func (c *CRIO) Client(t testing.TB) *cri.Client {
	t.Helper()
	client, err := cri.Dial(context.Background(), c.Endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// RunContainer starts a pod (host network, so no CNI is needed) with one
// container from image running the image's entrypoint, and returns the
// pod's and the container's IDs. It stays until the test ends or StopPod.
func (c *CRIO) RunContainer(t testing.TB, name, image string) (podID, containerID string) {
	t.Helper()
	podID, containerID = c.CreateContainer(t, name, image)
	if _, err := c.Runtime.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: containerID}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, c.logTail(20))
	}
	return podID, containerID
}

// CreateContainer is RunContainer without the start: the container stays
// created, as one whose pod is still starting.
func (c *CRIO) CreateContainer(t testing.TB, name, image string) (podID, containerID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A PID namespace per container, as the kubelet asks for a pod
	// without shareProcessNamespace: CRI-O then runs no infra (pause)
	// container, whose oom_score_adj of -998 runc cannot set without
	// CAP_SYS_RESOURCE, which some machines (this project's CI) lack. The
	// containers must say the same, as the kubelet's do.
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		LogDirectory: filepath.Join(c.Dir, "pods", name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// The kubelet passes the pod's QoS cgroup here; without one,
			// CRI-O's cgroupfs manager puts pods in /crio, shared by all.
			CgroupParent:    c.cgroup + "/pod-" + name,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns},
		},
	}
	sb, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\n%s", err, c.logTail(20))
	}
	ctr, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: sandboxCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			// CRI-O checks the signature policy against the name the
			// user asked for, which the kubelet passes here; without it
			// CreateContainer fails.
			Image:   &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image},
			LogPath: name + ".log",
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
		},
	})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v\n%s", image, err, c.logTail(20))
	}
	return sb.GetPodSandboxId(), ctr.GetContainerId()
}

// StopPod stops a pod's containers (they stay listed, exited).
func (c *CRIO) StopPod(t testing.TB, podID string) {
	t.Helper()
	if _, err := c.Runtime.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}

// RemovePod stops and removes a pod with its containers, as the kubelet's
// garbage collection does once a pod is gone.
func (c *CRIO) RemovePod(t testing.TB, podID string) {
	t.Helper()
	c.StopPod(t, podID)
	if _, err := c.Runtime.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}
