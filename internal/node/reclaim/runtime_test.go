//go:build linux

package reclaim_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

const mib = 1 << 20

// node is a private containerd on a tmpfs, with its own client.
type node struct {
	*testcontainerd.Containerd
	client *containerd.Client
}

func startNode(t *testing.T) node {
	t.Helper()
	c := testcontainerd.StartSmallDisk(t, 256)
	client, err := containerd.New(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return node{c, client}
}

func k8s() context.Context {
	return namespaces.WithNamespace(context.Background(), reclaim.CRINamespace)
}

// image is a runnable test image of its own size.
func image(t *testing.T, tag string, size int) testcontainerd.Image {
	return testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": testcontainerd.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: size}
}

// idOnly imports img and leaves only its ID record, as a CRI removal cut
// short does (containerd#13875), and returns the ID.
func (n node) idOnly(t *testing.T, img testcontainerd.Image) string {
	t.Helper()
	n.Import(t, img)
	id := n.ImageIDs(t)[img.Tags[0]]
	tagged, err := n.client.ImageService().Get(k8s(), img.Tags[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.client.ImageService().Create(k8s(), images.Image{Name: id, Target: tagged.Target, Labels: tagged.Labels}); err != nil && !errdefs.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	records, err := n.client.ImageService().List(k8s(), "target.digest=="+tagged.Target.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if r.Name != id {
			if err := n.client.ImageService().Delete(k8s(), r.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	return id
}

// importInto imports the images into namespace ns.
func (n node) importInto(t *testing.T, ns string, imgs ...testcontainerd.Image) {
	t.Helper()
	archive := t.TempDir() + "/images.tar"
	if err := testcontainerd.WriteArchive(archive, imgs); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ctr", "--address", n.Socket, "--namespace", ns, "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr -n %s images import: %v\n%s", ns, err, out)
	}
}

// blob writes content under a lease of its own, labelled.
func (n node) blob(t *testing.T, leaseID string, data []byte, labels map[string]string) {
	t.Helper()
	ctx := leases.WithLease(k8s(), leaseID)
	dgst := digest.FromBytes(data)
	desc := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: dgst, Size: int64(len(data))}
	if err := content.WriteBlob(ctx, n.client.ContentStore(), dgst.String(), bytes.NewReader(data), desc, content.WithLabels(labels)); err != nil {
		t.Fatal(err)
	}
}

func (n node) lease(t *testing.T, id string) leases.Lease {
	t.Helper()
	l, err := n.client.LeasesService().Create(k8s(), leases.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (n node) used(t *testing.T) uint64 {
	t.Helper()
	u, err := diskusage.Stat(n.RootDir())
	if err != nil {
		t.Fatal(err)
	}
	return u.Used()
}

// TestReclaimOnContainerd: every kind of leftover on a real containerd,
// reclaimed by the policy through containerd's own API, but for what a
// re-check right before its deletion finds protected: a container using
// it (started before the node was read, or between the reading and the
// deletion), the runtime's pin, an exclusion, a name given to it again (a
// pull), a namespace not named; a gc.root is never reclaimed; content a
// stale lease held and a pull took up since is kept by the collection
// that follows the lease's deletion. Afterwards the image
// filesystem holds within 5% of what a clean store holding the same
// images does.
func TestReclaimOnContainerd(t *testing.T) {
	n := startNode(t)
	kept := image(t, "example.com/reclaim/kept:1", 6*mib)
	n.Import(t, kept)
	cut := n.idOnly(t, image(t, "example.com/reclaim/cut:1", 12*mib))
	usedBefore := image(t, "example.com/reclaim/used-before:1", 3*mib)
	usedBeforeID := n.idOnly(t, usedBefore)
	n.RunContainer(t, "before", usedBeforeID)
	usedAfter := image(t, "example.com/reclaim/used-after:1", 3*mib)
	usedAfterID := n.idOnly(t, usedAfter)
	excluded := image(t, "example.com/reclaim/excluded:1", 2*mib)
	excludedID := n.idOnly(t, excluded)
	pulledAgain := image(t, "example.com/reclaim/pulled-again:1", 2*mib)
	pulledAgainID := n.idOnly(t, pulledAgain)
	pinned := image(t, "example.com/reclaim/pinned:1", 2*mib)
	pinnedID := n.idOnly(t, pinned)
	pinnedRec := mustGet(t, n, pinnedID)
	pinnedRec.Labels = map[string]string{"io.cri-containerd.pinned": "pinned"}
	if _, err := n.client.ImageService().Update(k8s(), pinnedRec, "labels.io.cri-containerd.pinned"); err != nil {
		t.Fatal(err)
	}
	n.importInto(t, "default", image(t, "example.com/reclaim/in-default:1", 8*mib))
	keptNs := image(t, "example.com/reclaim/in-kept-ns:1", 2*mib)
	n.importInto(t, "kept-ns", keptNs)
	stuck := n.lease(t, "import-never-ended")
	leased := bytes.Repeat([]byte("l"), 5*mib)
	n.blob(t, stuck.ID, leased, nil)
	rootLease := n.lease(t, "root-writer")
	rooted := bytes.Repeat([]byte("r"), 1*mib)
	n.blob(t, rootLease.ID, rooted, map[string]string{"containerd.io/gc.root": "kept"})
	if err := n.client.LeasesService().Delete(k8s(), rootLease); err != nil {
		t.Fatal(err)
	}

	client := n.Client(t)
	found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A pull that starts now takes up the content the stale lease held.
	pull := n.lease(t, "pull-in-progress")
	if err := n.client.LeasesService().AddResource(k8s(), pull, leases.Resource{ID: digest.FromBytes(leased).String(), Type: "content"}); err != nil {
		t.Fatal(err)
	}
	// Between the reading and the deletions: a container starts from one
	// leftover, a pull names another again.
	n.RunContainer(t, "after", usedAfterID)
	if _, err := n.client.ImageService().Create(k8s(), images.Image{Name: "example.com/reclaim/pulled-again:1", Target: mustGet(t, n, pulledAgainID).Target}); err != nil {
		t.Fatal(err)
	}

	pat, err := imageref.ParsePattern(excludedID)
	if err != nil {
		t.Fatal(err)
	}
	policy := reclaim.Policy{
		Kinds:      map[leftover.Kind]bool{leftover.UnnamedImage: true, leftover.OtherNamespace: true, leftover.OldLease: true, leftover.Unreferenced: true},
		Namespaces: map[string]bool{"default": true},
		Protect:    protect.Policy{Exclusions: []imageref.Pattern{pat}},
	}
	results := reclaim.Run(context.Background(), client, client, found, policy, false)
	got := map[string]reclaim.Outcome{}
	for _, r := range results {
		got[r.Namespace+" "+r.Name] = r.Outcome
		t.Logf("%s %s %s: %s (%d bytes) %s", r.Kind, r.Namespace, r.Name, r.Outcome, r.Bytes, r.Detail)
	}
	want := map[string]reclaim.Outcome{
		"k8s.io " + cut:                               reclaim.Reclaimed,
		"k8s.io " + usedBeforeID:                      reclaim.Kept,
		"k8s.io " + usedAfterID:                       reclaim.Kept,
		"k8s.io " + excludedID:                        reclaim.Kept,
		"k8s.io " + pulledAgainID:                     reclaim.Kept,
		"default example.com/reclaim/in-default:1":    reclaim.Reclaimed,
		"kept-ns example.com/reclaim/in-kept-ns:1":    reclaim.Found,
		"k8s.io import-never-ended":                   reclaim.Reclaimed,
		"k8s.io " + digest.FromBytes(rooted).String(): reclaim.Found,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if _, err := n.client.ImageService().Get(k8s(), cut); !errdefs.IsNotFound(err) {
		t.Errorf("the cut image's record is still there (%v)", err)
	}
	// The stale lease went, and the collection that followed kept what
	// the pull holds.
	if _, err := n.client.ContentStore().Info(k8s(), digest.FromBytes(leased)); err != nil {
		t.Errorf("content a pull holds is gone: %v", err)
	}
	if err := n.client.LeasesService().Delete(k8s(), pull, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}

	// A clean store with the same images, containers and root.
	clean := startNode(t)
	clean.Import(t, kept, usedBefore, usedAfter, excluded, pulledAgain, pinned)
	clean.importInto(t, "kept-ns", keptNs)
	clean.RunContainer(t, "before", usedBefore.Tags[0])
	clean.RunContainer(t, "after", usedAfter.Tags[0])
	l := clean.lease(t, "root-writer")
	clean.blob(t, l.ID, rooted, map[string]string{"containerd.io/gc.root": "kept"})
	if err := clean.client.LeasesService().Delete(k8s(), l, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
	dirty, want5 := n.used(t), clean.used(t)
	t.Logf("image filesystem: %d bytes used after reclaiming, %d in a clean store", dirty, want5)
	if d := float64(dirty) - float64(want5); d > 0.05*float64(want5) || -d > 0.05*float64(want5) {
		t.Errorf("the image filesystem holds %d bytes after reclaiming, a clean store with the same images %d: more than 5%% apart", dirty, want5)
	}
}

func mustGet(t *testing.T, n node, name string) images.Image {
	t.Helper()
	img, err := n.client.ImageService().Get(k8s(), name)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestReclaimSweepsWhatNoRecordNames: containerd's collection deletes what
// nothing holds from its metadata first and from its stores after, and
// sweeps a store only when it deleted something of that store's. Killed
// in between (as the field's runs of removals were, containerd#13875), it
// leaves blobs and snapshot directories on disk that no record names: no
// listing shows them, and containerd keeps them until a later collection
// happens to sweep that store. Made here as they are left: a blob in the
// content store's directory, a directory in the overlayfs snapshotter's.
// Reclaiming unreferenced leftovers has containerd sweep every store, so
// both go, though none was found.
func TestReclaimSweepsWhatNoRecordNames(t *testing.T) {
	n := startNode(t)
	kept := image(t, "example.com/sweep/kept:1", 4*mib)
	n.Import(t, kept)
	// The native snapshotter is loaded and holds nothing: it is not swept,
	// and a snapshot made in it would make its database.
	nativeDB := filepath.Join(n.RootDir(), "io.containerd.snapshotter.v1.native", "metadata.db")
	_, err := os.Stat(nativeDB)
	nativeUnused := os.IsNotExist(err)
	defer func() {
		if _, err := os.Stat(nativeDB); nativeUnused && err == nil {
			t.Error("reclaiming made a database in the native snapshotter, which the node does not use")
		}
	}()
	// Whatever the import left for the next collection goes first.
	client := n.Client(t)
	found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftover.Kind]bool{leftover.Unreferenced: true}}, false)

	blob := bytes.Repeat([]byte("b"), 3*mib)
	blobPath := filepath.Join(n.RootDir(), "io.containerd.content.v1.content", "blobs", "sha256", digest.FromBytes(blob).Encoded())
	if err := os.WriteFile(blobPath, blob, 0o444); err != nil {
		t.Fatal(err)
	}
	snapshotDir := filepath.Join(n.RootDir(), "io.containerd.snapshotter.v1.overlayfs", "snapshots", "999999")
	if err := os.MkdirAll(filepath.Join(snapshotDir, "fs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snapshotDir, "fs", "data"), bytes.Repeat([]byte("s"), 3*mib), 0o644); err != nil {
		t.Fatal(err)
	}

	found, err = reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 0 {
		t.Fatalf("leftovers found: %+v; the blob and the directory no record names are not listed", found)
	}
	before := n.used(t)
	imageFsUsed := func(context.Context) (uint64, error) { return n.used(t), nil }
	results := reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftover.Kind]bool{leftover.Unreferenced: true}, ImageFsUsed: imageFsUsed}, false)
	// The one result is the sweep's: what it freed, measured, though no
	// leftover was listed.
	if len(results) != 1 || results[0].Name != reclaim.SweptStores || results[0].Outcome != reclaim.Reclaimed || results[0].BytesUnknown {
		t.Fatalf("results %+v, want the sweep's alone, measured", results)
	}
	if got := results[0].Bytes; got < 6*mib {
		t.Errorf("the sweep freed %d bytes, as reported; want at least the 6 MiB no record names (%s)", got, results[0].Detail)
	}
	t.Logf("the sweep's result: %d bytes, %s", results[0].Bytes, results[0].Detail)

	after := n.used(t)
	t.Logf("image filesystem: %d bytes used before reclaiming, %d after", before, after)
	if _, err := os.Stat(blobPath); !os.IsNotExist(err) {
		t.Errorf("the blob no record names is still in the content store (%v)", err)
	}
	if _, err := os.Stat(snapshotDir); !os.IsNotExist(err) {
		t.Errorf("the snapshot directory no record names is still in the snapshotter's (%v)", err)
	}
	if before-min(before, after) < 6*mib {
		t.Errorf("reclaiming freed %d bytes, want at least the 6 MiB no record names", before-min(before, after))
	}
	if _, ok := n.ImageIDs(t)["example.com/sweep/kept:1"]; !ok {
		t.Error("the kept image is gone")
	}
	// A dry run sweeps nothing.
	if err := os.WriteFile(blobPath, blob, 0o444); err != nil {
		t.Fatal(err)
	}
	if results := reclaim.Run(context.Background(), client, client, nil, reclaim.Policy{Kinds: map[leftover.Kind]bool{leftover.Unreferenced: true}, ImageFsUsed: imageFsUsed}, true); len(results) != 0 {
		t.Errorf("a dry run: results %+v, want none", results)
	}
	if _, err := os.Stat(blobPath); err != nil {
		t.Errorf("a dry run swept the content store: %v", err)
	}
	// Where the image filesystem is not seen, what the sweep freed is
	// unknown, not 0.
	results = reclaim.Run(context.Background(), client, client, nil, reclaim.Policy{Kinds: map[leftover.Kind]bool{leftover.Unreferenced: true}}, false)
	if len(results) != 1 || results[0].Name != reclaim.SweptStores || !results[0].BytesUnknown || results[0].Bytes != 0 {
		t.Errorf("unseen: results %+v, want the sweep's with its bytes unknown", results)
	}
	if _, err := os.Stat(blobPath); !os.IsNotExist(err) {
		t.Errorf("unseen, the sweep left the blob no record names (%v)", err)
	}
}
