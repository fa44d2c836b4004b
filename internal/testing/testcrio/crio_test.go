//go:build linux

package testcrio_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// TestCRIO runs the whole round a test of ours needs: an image on the node,
// listed through CRI, a container from it, and what CRI-O says of it.
func TestCRIO(t *testing.T) {
	const app = "example.com/eraser/app:1"
	const pinned = "example.com/eraser/pinned:1"
	const dated = "example.com/eraser/dated:1"
	created := time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)
	c := testcrio.Start(t, testcrio.WithPinnedImages(pinned))
	ctx := context.Background()

	v, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("runtime %s %s, CRI %s", v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion())
	if v.GetRuntimeName() != "cri-o" {
		t.Errorf("runtime name %q, want cri-o", v.GetRuntimeName())
	}

	c.Import(t,
		testimage.Image{Tags: []string{app}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: 1 << 10},
		testimage.Image{Tags: []string{pinned}, RandomBytes: 1 << 10},
		// A short name: CRI-O records it as docker.io/library/..., the
		// second registry host this instance mirrors.
		testimage.Image{Tags: []string{"busybox:1.36"}, RandomBytes: 1 << 10},
	)
	// An image with a build time and a label, to see which of them CRI-O
	// reports (testcontainerd's images have neither).
	base, err := testimage.Image{RandomBytes: 1 << 10}.Build()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: created}
	cf.Config.Labels = map[string]string{"org.example.built-by": "testcrio"}
	withTime, err := mutate.ConfigFile(base, cf)
	if err != nil {
		t.Fatal(err)
	}
	c.ImportImages(t, testcrio.Tagged{Image: withTime, Tags: []string{dated}})

	ids := c.ImageIDs(t)
	for _, ref := range []string{app, pinned, dated, "docker.io/library/busybox:1.36", testcrio.SandboxImage} {
		if ids[ref] == "" {
			t.Errorf("ListImages has no %s: %v", ref, ids)
		}
	}

	list, err := c.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range list.GetImages() {
		t.Logf("image %s tags=%v digests=%v size=%d pinned=%v", img.GetId(), img.GetRepoTags(), img.GetRepoDigests(), img.GetSize(), img.GetPinned())
		tagged := func(ref string) bool { return slices.Contains(img.GetRepoTags(), ref) }
		if tagged(app) && img.GetPinned() {
			t.Errorf("%s is pinned; only %s and the pause image should be", app, pinned)
		}
		if (tagged(pinned) || tagged(testcrio.SandboxImage)) && !img.GetPinned() {
			t.Errorf("%v is not pinned", img.GetRepoTags())
		}
		if len(img.GetRepoDigests()) == 0 {
			t.Errorf("%v has no repo digest; a pull records one", img.GetRepoTags())
		}
	}

	pod, ctr := c.RunContainer(t, "smoke", app)
	st, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctr, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	// The cleanup removes cgroups under the instance's own parent only; a
	// container elsewhere would leave its cgroups behind on the host.
	if info := st.GetInfo()["info"]; !strings.Contains(info, `"cgroupsPath":"/eraser-testcrio-`) {
		t.Errorf("container's cgroup is not under the instance's parent: %.2000s", info)
	}
	if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container state %v, want running", st.GetStatus().GetState())
	}
	if st.GetStatus().GetImageRef() != ids[app] && st.GetStatus().GetImageId() != ids[app] {
		t.Logf("container image ref %q id %q, image ID %q", st.GetStatus().GetImageRef(), st.GetStatus().GetImageId(), ids[app])
	}

	// Issue 24 asks whether CRI-O can tell an image's age: print all it says.
	for _, ref := range []string{app, dated} {
		is, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		img, _ := json.Marshal(is.GetImage())
		t.Logf("ImageStatus %s image: %s", ref, img)
		for k, v := range is.GetInfo() {
			t.Logf("ImageStatus %s info[%q] = %s", ref, k, v)
		}
		var info struct {
			Labels    map[string]string `json:"labels"`
			ImageSpec struct {
				Created *time.Time `json:"created"`
			} `json:"imageSpec"`
		}
		if err := json.Unmarshal([]byte(is.GetInfo()["info"]), &info); err != nil {
			t.Fatalf("ImageStatus %s verbose info: %v", ref, err)
		}
		if ref == dated {
			if info.ImageSpec.Created == nil || !info.ImageSpec.Created.Equal(created) {
				t.Errorf("%s: imageSpec.created %v, want the config's %v", ref, info.ImageSpec.Created, created)
			}
			if info.Labels["org.example.built-by"] != "testcrio" {
				t.Errorf("%s: labels %v, want the config's", ref, info.Labels)
			}
		}
	}

	client := c.Client(t)
	if _, err := client.ImageTimes(ctx); err == nil {
		t.Logf("CRI-O answered containerd's images API?")
	} else {
		t.Logf("our client's ImageTimes on CRI-O: %v", err)
	}

	// pinned_images changes as on a node: a rewrite and SIGHUP.
	c.SetPinnedImages(t, app)
	if st, err := c.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: app}}); err != nil || !st.GetImage().GetPinned() {
		t.Errorf("%s not pinned after SetPinnedImages: %v %v", app, st.GetImage(), err)
	}
	c.SetPinnedImages(t)

	c.RemovePod(t, pod)
	if _, err := c.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: app}}); err != nil {
		t.Errorf("RemoveImage %s after its pod is gone: %v", app, err)
	}
	if id := c.ImageIDs(t)[app]; id != "" {
		t.Errorf("%s still listed after RemoveImage", app)
	}
}
