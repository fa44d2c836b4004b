//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testcri"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// The images of the image volume scenario: a runnable image whose
// containers mount the data images, one by a running container, one by an
// exited one, one by a container created and never started.
const (
	volApp     = "example.com/vol/app:1"
	volRunning = "example.com/vol/data-running:1"
	volExited  = "example.com/vol/data-exited:1"
	volCreated = "example.com/vol/data-created:1"
	volJunk    = "example.com/vol/junk:1"
)

// imageVolumes reports whether the runtime mounts images as volumes
// (CRI's Mount.image): containerd from 2.1, CRI-O from 1.31.
func imageVolumes(name, version string) bool {
	major, minor := majorMinor(version)
	switch name {
	case "containerd":
		return major > 2 || major == 2 && minor >= 1
	case "cri-o":
		return major > 1 || major == 1 && minor >= 31
	}
	return false
}

// majorMinor reads "v2.3.3" and "1.6.20~ds1" alike.
func majorMinor(version string) (major, minor int) {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	major, _ = strconv.Atoi(parts[0])
	minor, _ = strconv.Atoi(parts[1])
	return major, minor
}

// verdicts are the remover's log lines for the images named, name →
// outcome and detail.
func verdicts(t *testing.T, stderr string, names ...string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, line := range strings.Split(stderr, "\n") {
		var l struct {
			Outcome, Detail string
			Names           []string
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Outcome == "" {
			continue
		}
		for _, name := range names {
			for _, n := range l.Names {
				if n == name {
					out[name] = [2]string{l.Outcome, l.Detail}
				}
			}
		}
	}
	return out
}

// TestImageVolumesKept: an image a container mounts as an image volume
// (a pod's volumes[].image, which the kubelet passes as CRI's Mount.image
// with the image's ID) is in use, for a running, an exited and a created
// container alike: neither "*" nor an ImageList naming it removes it, and
// the run says which container mounts it. On a runtime without image
// volumes (containerd before 2.1), a mount of an image is refused and the
// runs are as before.
func TestImageVolumesKept(t *testing.T) {
	noderuntime.EachNode(t, noderuntime.Options{}, func(t *testing.T, rt noderuntime.Runtime, n noderuntime.Node) {
		pause := testimage.Pause(t)
		data := func(tag string) testimage.Image {
			return testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"data/" + tag[strings.LastIndex(tag, "/")+1:]: []byte(tag)}, RandomBytes: 2048}
		}
		n.Import(t, testimage.Image{Tags: []string{volApp}, Files: map[string][]byte{"pause": pause}, Entrypoint: []string{"/pause"}, RandomBytes: 1024},
			data(volRunning), data(volExited), data(volCreated), data(volJunk))
		ids := n.ImageIDs(t)
		client := n.Client(t)
		volume := func(tag string) testcri.ImageVolume {
			return testcri.ImageVolume{Path: "/data", Image: ids[tag], Reference: tag}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()

		if !imageVolumes(client.RuntimeName, client.RuntimeVersion) {
			// Nothing to keep: the runtime does not mount the image, and a
			// run removes the images as it always did.
			err := n.TryCreateContainerMounting(t, "reader", volApp, volume(volRunning))
			if err == nil {
				t.Fatalf("%s %s created a container mounting an image; the test takes it for a runtime without image volumes", client.RuntimeName, client.RuntimeVersion)
			}
			t.Logf("%s %s has no image volumes (it refuses the mount: %v): checked that a run is as before", client.RuntimeName, client.RuntimeVersion, err)
			r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, volRunning), "--runtime-endpoint="+n.CRIEndpoint())
			if r.Code != 0 || r.Summary.Counts["removed"] != 1 {
				t.Errorf("ImageList naming %s: exit %d, counts %v\n%s", volRunning, r.Code, r.Summary.Counts, r.Stderr)
			}
			return
		}

		n.RunContainerMounting(t, "reader", volApp, volume(volRunning))
		pod, exited := n.RunContainerMounting(t, "exited-reader", volApp, volume(volExited))
		n.StopPod(t, pod)
		n.CreateContainerMounting(t, "created-reader", volApp, volume(volCreated))
		// What the runtime's status shows of the mount: the image as the
		// kubelet passed it (containerd) or its ID (CRI-O).
		var shown []string
		for _, m := range n.ContainerMounts(t, exited) {
			if m.GetImage().GetImage() != "" {
				shown = append(shown, m.GetImage().GetImage(), m.GetImage().GetUserSpecifiedImage())
			}
		}
		t.Logf("%s %s shows the exited container's image mount as %q", client.RuntimeName, client.RuntimeVersion, shown)

		mounted := func(name string) [2]string {
			return [2]string{"in use", "container " + name + " mounts it as an image volume"}
		}
		want := map[string][2]string{
			volApp:     {"in use", "container created-reader"},
			volRunning: mounted("reader"),
			volExited:  mounted("exited-reader"),
			volCreated: mounted("created-reader"),
			volJunk:    {"removed", ""},
		}
		r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint())
		if r.Code != 0 {
			t.Fatalf("\"*\": exit %d\n%s", r.Code, r.Stderr)
		}
		got := verdicts(t, r.Stderr, volApp, volRunning, volExited, volCreated, volJunk)
		// The app image is used by all three: which one the detail names
		// is the index's choice.
		if a := got[volApp]; a[0] == "in use" && strings.HasPrefix(a[1], "container ") && strings.HasSuffix(a[1], "reader") {
			got[volApp] = want[volApp]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("\"*\" (-want +got):\n%s\n%s", diff, r.Stderr)
		}

		r = runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, volRunning, volExited, volCreated), "--runtime-endpoint="+n.CRIEndpoint())
		if r.Code != 0 || r.Summary.Counts["in use"] != 3 || r.Summary.Counts["removed"] != 0 {
			t.Errorf("ImageList naming the mounted images: exit %d, counts %v, want 3 in use\n%s", r.Code, r.Summary.Counts, r.Stderr)
		}
		delete(want, volJunk)
		delete(want, volApp)
		if diff := cmp.Diff(want, verdicts(t, r.Stderr, volRunning, volExited, volCreated)); diff != "" {
			t.Errorf("ImageList (-want +got):\n%s\n%s", diff, r.Stderr)
		}
		present := n.ImageIDs(t)
		for _, tag := range []string{volApp, volRunning, volExited, volCreated} {
			if _, ok := present[tag]; !ok {
				t.Errorf("%s was removed", tag)
			}
		}
	})
}
