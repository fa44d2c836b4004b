//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// What each runtime's store records and holds after an interruption: its
// image records, what is on disk that no record names, and what its log
// says about the repair.

// namedImages are the IDs of the images the CRI lists with a tag or a repo
// digest, and of those it lists with neither.
func namedImages(t *testing.T, n *interruptNode) (named, unnamed map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := n.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	named, unnamed = map[string]bool{}, map[string]bool{}
	for _, img := range resp.GetImages() {
		if len(img.GetRepoTags())+len(img.GetRepoDigests()) > 0 {
			named[img.GetId()] = true
		} else {
			unnamed[img.GetId()] = true
		}
	}
	return named, unnamed
}

// containerdRecords are every namespace's image records, "namespace name
// target", and leases, "namespace lease ID".
func containerdRecords(t *testing.T, socket string) []string {
	t.Helper()
	client, err := containerd.New(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nss, err := client.NamespaceService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ns := range nss {
		nctx := namespaces.WithNamespace(ctx, ns)
		imgs, err := client.ImageService().List(nctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range imgs {
			out = append(out, fmt.Sprintf("%s image %s %s", ns, img.Name, img.Target.Digest))
		}
		ls, err := client.LeasesService().List(nctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			out = append(out, fmt.Sprintf("%s lease %s", ns, l.ID))
		}
	}
	sort.Strings(out)
	return out
}

// containerdUnrecorded is what containerd's content store and overlayfs
// snapshots hold on disk beyond what its metadata lists: blobs no
// namespace's content names, and the snapshot directories' disk beyond the
// listed snapshots' usage.
func containerdUnrecorded(t *testing.T, socket, root string) (string, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := containerdrecords.Read(ctx, endpoint.Address{Scheme: endpoint.Unix, Path: socket})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	var snapshots int
	var listed uint64
	for _, ns := range r.Namespaces {
		for _, b := range ns.Content {
			known[strings.TrimPrefix(b.Digest, "sha256:")] = true
		}
		for _, sn := range ns.Snapshots {
			if sn.Snapshotter == "overlayfs" {
				snapshots++
				listed += uint64(max(sn.Bytes, 0))
			}
		}
	}
	var blobs int
	var blobBytes uint64
	dir := filepath.Join(root, "io.containerd.content.v1.content", "blobs", "sha256")
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if !known[f.Name()] {
			blobs++
			blobBytes += diskOf(filepath.Join(dir, f.Name()))
		}
	}
	snapDir := filepath.Join(root, "io.containerd.snapshotter.v1.overlayfs", "snapshots")
	dirs, _ := os.ReadDir(snapDir)
	onDisk := diskOf(snapDir)
	snapBytes := onDisk - min(onDisk, listed)
	return fmt.Sprintf("%d blobs (%s) no namespace's content lists; %d snapshot directories (%s), %d snapshots listed (%s)",
		blobs, human(blobBytes), len(dirs), human(onDisk), snapshots, human(listed)), blobBytes + snapBytes
}

// crioUnrecorded is what CRI-O's overlay store holds on disk that no layer
// record names: layer directories a deletion cut short left.
func crioUnrecorded(t *testing.T, root string) (string, uint64) {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"l": true}
	for _, l := range r.Layers {
		known[l.ID] = true
	}
	var dirs int
	var n uint64
	entries, _ := os.ReadDir(filepath.Join(root, r.Driver))
	for _, e := range entries {
		if e.IsDir() && !known[e.Name()] {
			dirs++
			n += diskOf(filepath.Join(root, r.Driver, e.Name()))
		}
	}
	return fmt.Sprintf("%d layer directories no layer record names", dirs), n
}

// crioRecords are containers/storage's records: images with their names,
// layers with their parents and flags, containers.
func crioRecords(t *testing.T, root string) []string {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range r.Images {
		names := append([]string{}, img.Names...)
		sort.Strings(names)
		out = append(out, fmt.Sprintf("image %s %s top %s", img.ID, strings.Join(names, ","), img.TopLayer))
	}
	for _, l := range r.Layers {
		out = append(out, fmt.Sprintf("layer %s parent %q incomplete %v", l.ID, l.Parent, l.Incomplete))
	}
	for _, c := range r.Containers {
		out = append(out, fmt.Sprintf("container %s image %s layer %s", c.ID, c.Image, c.Layer))
	}
	sort.Strings(out)
	return out
}

// crioStoreLeftovers are the leftovers in a CRI-O store's records, read
// directly, however young; no container is judged (none runs).
func crioStoreLeftovers(t *testing.T, root string) map[leftoverkind.Kind][]leftover.Leftover {
	t.Helper()
	r, err := criorecords.Read(root)
	if err != nil {
		t.Fatal(err)
	}
	sizeOf := func(layer string) int64 {
		n, _ := criorecords.LayerDiskBytes(context.Background(), root, r.Driver, layer)
		return n
	}
	out := map[leftoverkind.Kind][]leftover.Leftover{}
	for _, l := range leftover.CRIO(r, leftover.CRIOOptions{SizeOf: sizeOf, Now: time.Now()}) {
		out[l.Kind] = append(out[l.Kind], l)
	}
	return out
}

// logLines are the messages of a logrus log file that contain any of
// words.
func logLines(file string, words ...string) []string {
	b, _ := os.ReadFile(file)
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		msg := line
		if _, m, ok := strings.Cut(line, " msg="); ok {
			msg = m
		}
		// The configuration it prints at start names every option.
		if strings.HasPrefix(msg, `"Current CRI-O configuration`) {
			continue
		}
		lower := strings.ToLower(msg)
		for _, w := range words {
			if strings.Contains(lower, w) {
				out = append(out, msg)
				break
			}
		}
	}
	return out
}
