//go:build linux

// Containers that mount images as volumes, as the kubelet starts a pod
// whose spec has volumes[].image.

package testcri

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageVolume is an image mounted read-only into a container at Path.
type ImageVolume struct {
	Path string
	// Image is the image as the kubelet passes it: the ID its pull
	// resolved the pod's reference to.
	Image string
	// Reference is the image as the pod's volume names it.
	Reference string
}

func (v ImageVolume) mount() *runtimeapi.Mount {
	return &runtimeapi.Mount{ContainerPath: v.Path, Readonly: true,
		Image: &runtimeapi.ImageSpec{Image: v.Image, UserSpecifiedImage: v.Reference}}
}

// CreateContainerMounting is CreateContainer with image volumes.
func (c *CRI) CreateContainerMounting(t testing.TB, name, image string, volumes ...ImageVolume) (podID, containerID string) {
	t.Helper()
	return c.createContainer(t, name, image, mounts(volumes))
}

// TryCreateContainerMounting is CreateContainerMounting on a runtime that
// may refuse it (one without image volumes): it returns the runtime's
// error, and removes the pod then. The container it creates stays as
// CreateContainerMounting's do.
func (c *CRI) TryCreateContainerMounting(t testing.TB, name, image string, volumes ...ImageVolume) error {
	t.Helper()
	_, _, err := c.tryCreateContainer(name, image, mounts(volumes))
	return err
}

// RunContainerMounting is RunContainer with image volumes.
func (c *CRI) RunContainerMounting(t testing.TB, name, image string, volumes ...ImageVolume) (podID, containerID string) {
	t.Helper()
	podID, containerID = c.CreateContainerMounting(t, name, image, volumes...)
	if _, err := c.Runtime.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: containerID}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, c.logTail())
	}
	return podID, containerID
}

// ContainerMounts are the mounts the runtime's status of a container shows.
func (c *CRI) ContainerMounts(t testing.TB, containerID string) []*runtimeapi.Mount {
	t.Helper()
	resp, err := c.Runtime.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", containerID, err)
	}
	return resp.GetStatus().GetMounts()
}

func mounts(volumes []ImageVolume) []*runtimeapi.Mount {
	out := make([]*runtimeapi.Mount, 0, len(volumes))
	for _, v := range volumes {
		out = append(out, v.mount())
	}
	return out
}
