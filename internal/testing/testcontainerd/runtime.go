//go:build linux

// What a test does with a running containerd: its CRI client, images, containers and pods.

package testcontainerd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// Client is our own CRI client connected to this containerd.
func (c *Containerd) Client(t testing.TB) *cri.Client {
	t.Helper()
	client, err := cri.Dial(context.Background(), c.Endpoint, cri.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// Import builds the images and imports them into the k8s.io namespace,
// each with the repository digest a pull from a registry records: the state
// of a node's images that are pulled, re-pullable (protect.Repullable).
func (c *Containerd) Import(t testing.TB, images ...Image) {
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
func (c *Containerd) ImportUnpulled(t testing.TB, images ...Image) {
	t.Helper()
	archive := filepath.Join(c.Dir, fmt.Sprintf("import-%d.tar", time.Now().UnixNano()))
	if err := WriteArchive(archive, images); err != nil {
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

// RunContainer starts a pod (host network, no CNI needed) with one
// container from image running the image's entrypoint, and returns the
// container's ID. It stays until the test ends or StopPod.
func (c *Containerd) RunContainer(t testing.TB, name, image string) (podID, containerID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sandboxCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		LogDirectory: filepath.Join(c.Dir, "logs", name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	sb, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandboxCfg})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\n%s", err, c.logTail())
	}
	ctr, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: sandboxCfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: image},
			LogPath:  name + ".log",
			Linux:    &runtimeapi.LinuxContainerConfig{},
		},
	})
	if err != nil {
		t.Fatalf("CreateContainer %s: %v\n%s", image, err, c.logTail())
	}
	if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.GetContainerId()}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, c.logTail())
	}
	return sb.GetPodSandboxId(), ctr.GetContainerId()
}

// StopPod stops a pod's containers (they stay listed, exited).
func (c *Containerd) StopPod(t testing.TB, podID string) {
	t.Helper()
	if _, err := c.Runtime.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}

// RemovePod stops and removes a pod with its containers, as the kubelet's
// garbage collection does once a pod is gone.
func (c *Containerd) RemovePod(t testing.TB, podID string) {
	t.Helper()
	c.StopPod(t, podID)
	if _, err := c.Runtime.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podID}); err != nil {
		t.Fatal(err)
	}
}

// AddRepoDigest gives a tagged image the repo digest a registry pull would
// have recorded (ImportUnpulled's images have none; Import's have it
// already) and returns it, "repo@sha256:...".
func (c *Containerd) AddRepoDigest(t testing.TB, tag string) string {
	t.Helper()
	return c.tagByDigest(t, c.digests(t), tag)
}

// ImageIDs lists the IDs of the images in the k8s.io namespace, by tag.
func (c *Containerd) ImageIDs(t testing.TB) map[string]string {
	t.Helper()
	resp, err := c.Images.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, img := range resp.GetImages() {
		for _, tag := range img.GetRepoTags() {
			out[tag] = img.GetId()
		}
		out[img.GetId()] = img.GetId()
	}
	return out
}
