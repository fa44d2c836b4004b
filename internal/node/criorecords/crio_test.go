//go:build linux

package criorecords_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// TestOnCRIO: a real CRI-O's store, read from its files. Two images pulled
// on one base layer hold their top layers alone and the base together; a
// container holds its image; removing one image leaves the base to the
// other. The sizes expected are measured apart from the records: the
// layers' tars, the documents' files, the files of the layers' diffs.
func TestOnCRIO(t *testing.T) {
	testcrio.Require(t)
	c := testcrio.Start(t)
	ctx := context.Background()

	base, err := testimage.Image{Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: 256 << 10}.Build()
	if err != nil {
		t.Fatal(err)
	}
	top := func(n int) v1.Layer {
		img, err := testimage.Image{RandomBytes: n}.Build()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		return layers[0]
	}
	topA, topB := top(128<<10), top(64<<10)
	imgA, err := mutate.AppendLayers(base, topA)
	if err != nil {
		t.Fatal(err)
	}
	imgB, err := mutate.AppendLayers(base, topB)
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "example.com/exclusive/a:1", "example.com/exclusive/b:1"
	c.ImportImages(t, testcrio.Tagged{Image: imgA, Tags: []string{a}}, testcrio.Tagged{Image: imgB, Tags: []string{b}})
	ids := c.ImageIDs(t)
	idA, idB := strings.TrimPrefix(ids[a], "sha256:"), strings.TrimPrefix(ids[b], "sha256:")

	// What the sizes should be, from outside the records.
	baseLayers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	tarA, tarB, tarBase := tarBytes(t, topA), tarBytes(t, topB), tarBytes(t, baseLayers[0])
	docsA, docsB := docBytes(t, c.RootDir(), idA), docBytes(t, c.RootDir(), idB)

	r := read(t, c.RootDir())
	if r.Driver != "overlay" {
		t.Errorf("driver %q, want overlay", r.Driver)
	}
	recA, recB := image(t, r, idA), image(t, r, idB)
	layerA, layerB := layer(t, r, recA.TopLayer), layer(t, r, recB.TopLayer)
	if layerA.Parent == "" || layerA.Parent != layerB.Parent {
		t.Fatalf("the top layers' parents %q and %q, want one base layer", layerA.Parent, layerB.Parent)
	}
	baseLayer := layer(t, r, layerA.Parent)
	for _, l := range []struct {
		rec  criorecords.Layer
		want int64
	}{{layerA, tarA}, {layerB, tarB}, {baseLayer, tarBase}} {
		if l.rec.DiffBytes != l.want {
			t.Errorf("layer %s: diff size %d, want the tar's %d", l.rec.ID, l.rec.DiffBytes, l.want)
		}
	}
	if recA.BigDataBytes != docsA || recB.BigDataBytes != docsB {
		t.Errorf("documents' bytes %d and %d, want the files' %d and %d", recA.BigDataBytes, recB.BigDataBytes, docsA, docsB)
	}
	if n, err := criorecords.LayerDiskBytes(context.Background(), c.RootDir(), r.Driver, layerA.ID); err != nil || n != 128<<10 {
		t.Errorf("disk of a's top layer: %d, %v; want its one file's %d", n, err, 128<<10)
	}

	exclusive := func(want int64, imageIDs ...string) {
		t.Helper()
		if got := criorecords.Exclusive(r, imageIDs); got != want {
			t.Errorf("exclusive bytes of %v: %d, want %d", imageIDs, got, want)
		}
	}
	exclusive(tarA+docsA, idA)
	exclusive(tarB+docsB, idB)
	exclusive(tarA+tarB+tarBase+docsA+docsB, idA, idB)
	noLeftovers(t, c, r)

	// A container from a holds it; the container is CRI-O's, and an orphan
	// when CRI-O's CRI does not list it.
	podID, ctrID := c.RunContainer(t, "exclusive", a)
	r = read(t, c.RootDir())
	var ctr criorecords.Container
	for _, rc := range r.Containers {
		if rc.ID == ctrID {
			ctr = rc
		}
	}
	if ctr.Image != idA || ctr.PodID != podID || ctr.Layer == "" {
		t.Fatalf("container %s's record %+v, want image %s, pod %s and a layer", ctrID, ctr, idA, podID)
	}
	if rw := layer(t, r, ctr.Layer); rw.Parent != recA.TopLayer {
		t.Errorf("the container's layer stands on %q, want a's top layer %s", rw.Parent, recA.TopLayer)
	}
	exclusive(0, idA)
	exclusive(tarB+docsB, idB)
	noLeftovers(t, c, r)
	// What the container wrote, in its read-write layer.
	dir, err := criorecords.LayerDir(c.RootDir(), r.Driver, ctr.Layer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "written.bin"), make([]byte, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := criorecords.LayerDiskBytes(context.Background(), c.RootDir(), r.Driver, ctr.Layer); err != nil || n != 5000 {
		t.Errorf("disk of the container's layer: %d, %v; want the 5000 bytes written", n, err)
	}
	// The pod's sandbox has its storage too (CRI-O makes it without an
	// infra container): listed, it is no orphan.
	var orphans []string
	for _, l := range leftover.CRIO(r, leftover.CRIOOptions{Live: map[string]bool{podID: true}, SizeOf: sizeOf(c.RootDir(), r.Driver), Now: time.Now()}) {
		orphans = append(orphans, fmt.Sprintf("%s %s %d", l.Kind, l.Name, l.Bytes))
	}
	want := []string{fmt.Sprintf("%s %s (k8s_exclusive_exclusive_default_uid-exclusive_0) 5000", leftoverkind.OrphanContainer, ctrID)}
	if diff := cmp.Diff(want, orphans); diff != "" {
		t.Errorf("leftovers with the container not listed (-want +got):\n%s", diff)
	}
	c.RemovePod(t, podID)

	// b removed: the base layer is a's alone.
	if _, err := c.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: idB}}); err != nil {
		t.Fatal(err)
	}
	r = read(t, c.RootDir())
	for _, l := range r.Layers {
		if l.ID == layerB.ID {
			t.Errorf("b's top layer %s is still recorded", l.ID)
		}
	}
	exclusive(tarA+tarBase+docsA, idA)
	noLeftovers(t, c, r)
}

func read(t *testing.T, root string) criorecords.Records {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func image(t *testing.T, r criorecords.Records, id string) criorecords.Image {
	t.Helper()
	for _, img := range r.Images {
		if img.ID == id {
			return img
		}
	}
	t.Fatalf("no image record %s", id)
	return criorecords.Image{}
}

func layer(t *testing.T, r criorecords.Records, id string) criorecords.Layer {
	t.Helper()
	for _, l := range r.Layers {
		if l.ID == id {
			return l
		}
	}
	t.Fatalf("no layer record %s", id)
	return criorecords.Layer{}
}

func sizeOf(root, driver string) func(string) int64 {
	return func(id string) int64 {
		n, _ := criorecords.LayerDiskBytes(context.Background(), root, driver, id)
		return n
	}
}

// noLeftovers: with every container and sandbox CRI-O lists live, the
// store has no leftover.
func noLeftovers(t *testing.T, c *testcrio.CRIO, r criorecords.Records) {
	t.Helper()
	ctx := context.Background()
	live := map[string]bool{}
	ctrs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range ctrs.GetContainers() {
		live[ctr.GetId()] = true
	}
	pods, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.GetItems() {
		live[p.GetId()] = true
	}
	if found := leftover.CRIO(r, leftover.CRIOOptions{Live: live, SizeOf: sizeOf(c.RootDir(), r.Driver), Now: time.Now()}); len(found) > 0 {
		t.Errorf("leftovers: %+v", found)
	}
}

// tarBytes is the length of the layer's uncompressed tar.
func tarBytes(t *testing.T, l v1.Layer) int64 {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// docBytes is the size of the files containers/storage keeps the image's
// documents in.
func docBytes(t *testing.T, root, id string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(root, "overlay-images", id), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
