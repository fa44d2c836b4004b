//go:build linux

package reclaim_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testleftovers"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

const mib = 1 << 20

func startNode(t *testing.T) testleftovers.Node {
	t.Helper()
	return testleftovers.New(t, testcontainerd.Start(t, testcontainerd.WithSmallDisk(256)))
}

// used is what the filesystem at root holds.
func used(t *testing.T, root string) uint64 {
	t.Helper()
	u, err := diskusage.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	return u.Used()
}

// image is a runnable test image of its own size.
func image(t *testing.T, tag string, size int) testimage.Image {
	return testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: size}
}

// TestReclaimOnContainerd: every kind of leftover on a real containerd
// (a lease a killed pull's client left among them),
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
	cut := n.IDOnly(t, image(t, "example.com/reclaim/cut:1", 12*mib))
	usedBefore := image(t, "example.com/reclaim/used-before:1", 3*mib)
	usedBeforeID := n.IDOnly(t, usedBefore)
	n.RunContainer(t, "before", usedBeforeID)
	usedAfter := image(t, "example.com/reclaim/used-after:1", 3*mib)
	usedAfterID := n.IDOnly(t, usedAfter)
	excluded := image(t, "example.com/reclaim/excluded:1", 2*mib)
	excludedID := n.IDOnly(t, excluded)
	pulledAgain := image(t, "example.com/reclaim/pulled-again:1", 2*mib)
	pulledAgainID := n.IDOnly(t, pulledAgain)
	pinned := image(t, "example.com/reclaim/pinned:1", 2*mib)
	pinnedID := n.IDOnly(t, pinned)
	n.Pin(t, pinnedID)
	n.ImportInto(t, "default", image(t, "example.com/reclaim/in-default:1", 8*mib))
	keptNs := image(t, "example.com/reclaim/in-kept-ns:1", 2*mib)
	n.ImportInto(t, "kept-ns", keptNs)
	stuck := n.ClientLease(t, testleftovers.CRINamespace)
	leased := bytes.Repeat([]byte("l"), 5*mib)
	n.Blob(t, stuck, leased, nil)
	rootLease := n.Lease(t, "root-writer")
	rooted := bytes.Repeat([]byte("r"), 1*mib)
	n.Blob(t, rootLease.ID, rooted, map[string]string{"containerd.io/gc.root": "kept"})
	if err := n.Client.LeasesService().Delete(testleftovers.K8s(), rootLease); err != nil {
		t.Fatal(err)
	}

	client := n.Containerd.Client(t)
	found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// A pull that starts now takes up the content the stale lease held.
	pull := n.Lease(t, "pull-in-progress")
	if err := n.Client.LeasesService().AddResource(testleftovers.K8s(), pull, leases.Resource{ID: digest.FromBytes(leased).String(), Type: "content"}); err != nil {
		t.Fatal(err)
	}
	// Between the reading and the deletions: a container starts from one
	// leftover, a pull names another again.
	n.RunContainer(t, "after", usedAfterID)
	if _, err := n.Client.ImageService().Create(testleftovers.K8s(), images.Image{Name: "example.com/reclaim/pulled-again:1", Target: mustGet(t, n, testleftovers.CRINamespace, pulledAgainID).Target}); err != nil {
		t.Fatal(err)
	}

	pat := imageref.ParsePattern(excludedID)
	policy := reclaim.Policy{
		Kinds:      map[leftoverkind.Kind]bool{leftoverkind.UnnamedImage: true, leftoverkind.OtherNamespace: true, leftoverkind.OldLease: true, leftoverkind.Unreferenced: true},
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
		"k8s.io " + stuck:                             reclaim.Reclaimed,
		"k8s.io " + digest.FromBytes(rooted).String(): reclaim.Found,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if _, err := n.Client.ImageService().Get(testleftovers.K8s(), cut); !errdefs.IsNotFound(err) {
		t.Errorf("the cut image's record is still there (%v)", err)
	}
	// The stale lease went, and the collection that followed kept what
	// the pull holds.
	if _, err := n.Client.ContentStore().Info(testleftovers.K8s(), digest.FromBytes(leased)); err != nil {
		t.Errorf("content a pull holds is gone: %v", err)
	}
	if err := n.Client.LeasesService().Delete(testleftovers.K8s(), pull, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}

	// A clean store with the same images, containers and root.
	clean := startNode(t)
	clean.Import(t, kept, usedBefore, usedAfter, excluded, pulledAgain, pinned)
	clean.ImportInto(t, "kept-ns", keptNs)
	clean.RunContainer(t, "before", usedBefore.Tags[0])
	clean.RunContainer(t, "after", usedAfter.Tags[0])
	l := clean.Lease(t, "root-writer")
	clean.Blob(t, l.ID, rooted, map[string]string{"containerd.io/gc.root": "kept"})
	if err := clean.Client.LeasesService().Delete(testleftovers.K8s(), l, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
	dirty, want5 := used(t, n.RootDir()), used(t, clean.RootDir())
	t.Logf("image filesystem: %d bytes used after reclaiming, %d in a clean store", dirty, want5)
	if d := float64(dirty) - float64(want5); d > 0.05*float64(want5) || -d > 0.05*float64(want5) {
		t.Errorf("the image filesystem holds %d bytes after reclaiming, a clean store with the same images %d: more than 5%% apart", dirty, want5)
	}
}

func mustGet(t *testing.T, n testleftovers.Node, ns, name string) images.Image {
	t.Helper()
	img, err := n.Client.ImageService().Get(testleftovers.In(ns), name)
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
	client := n.Containerd.Client(t)
	found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.Unreferenced: true}}, false)

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
	before := used(t, n.RootDir())
	imageFsUsed := func(context.Context) (uint64, error) { return used(t, n.RootDir()), nil }
	results := reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.Unreferenced: true}, ImageFsUsed: imageFsUsed}, false)
	// The one result is the sweep's: what it freed, measured, though no
	// leftover was listed.
	if len(results) != 1 || results[0].Name != reclaim.SweptStores || results[0].Outcome != reclaim.Reclaimed || results[0].BytesUnknown {
		t.Fatalf("results %+v, want the sweep's alone, measured", results)
	}
	if got := results[0].Bytes; got < 6*mib {
		t.Errorf("the sweep freed %d bytes, as reported; want at least the 6 MiB no record names (%s)", got, results[0].Detail)
	}
	t.Logf("the sweep's result: %d bytes, %s", results[0].Bytes, results[0].Detail)

	after := used(t, n.RootDir())
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
	if results := reclaim.Run(context.Background(), client, client, nil, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.Unreferenced: true}, ImageFsUsed: imageFsUsed}, true); len(results) != 0 {
		t.Errorf("a dry run: results %+v, want none", results)
	}
	if _, err := os.Stat(blobPath); err != nil {
		t.Errorf("a dry run swept the content store: %v", err)
	}
	// Where the image filesystem is not seen, what the sweep freed is
	// unknown, not 0.
	results = reclaim.Run(context.Background(), client, client, nil, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.Unreferenced: true}}, false)
	if len(results) != 1 || results[0].Name != reclaim.SweptStores || !results[0].BytesUnknown || results[0].Bytes != 0 {
		t.Errorf("unseen: results %+v, want the sweep's with its bytes unknown", results)
	}
	if _, err := os.Stat(blobPath); !os.IsNotExist(err) {
		t.Errorf("unseen, the sweep left the blob no record names (%v)", err)
	}
}

// TestReclaimLeavesOthersLeases: on a node whose containerd Docker Engine
// (its containerd image store) and BuildKit share with the kubelet, their
// leases hold what they keep on purpose, without expiry: Docker's a
// container's writable layer (a lease in namespace moby named after the
// container), BuildKit's its cache (gc.flat, in buildkit, or in k8s.io
// where it shares the kubelet's images). Reclaiming old-lease, however
// old they are and whatever namespaces are named, leaves them and what
// they hold; it takes a lease whose expiry passed, the lease of an import
// whose client (ctr, containerd's own) was killed, and such a lease of
// another namespace only once the policy names it.
func TestReclaimLeavesOthersLeases(t *testing.T) {
	n := startNode(t)
	docker := n.DockerContainer(t, image(t, "example.com/reclaim/docker-base:1", 2*mib))
	buildkit := n.BuildKitCache(t, "buildkit", bytes.Repeat([]byte("b"), 2*mib))
	shared := n.BuildKitCache(t, testleftovers.CRINamespace, bytes.Repeat([]byte("s"), 1*mib))
	forgotten := n.ClientLease(t, "moby")
	n.BlobIn(t, "moby", forgotten, bytes.Repeat([]byte("m"), 1*mib), nil)
	// A real client's: ctr's import, killed.
	killed, killedBlobs := n.KilledImport(t, testleftovers.CRINamespace, image(t, "example.com/reclaim/killed-import:1", 48*mib))
	// Last: nothing is deleted after it until the reclaim, so containerd's
	// own collection does not drop it first.
	expiredBlob := bytes.Repeat([]byte("e"), 3*mib)
	expired := n.ExpiredLease(t, testleftovers.CRINamespace, expiredBlob)

	client := n.Containerd.Client(t)
	reclaimLeases := func(namespaces map[string]bool) map[string]string {
		t.Helper()
		found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		results := reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.OldLease: true}, Namespaces: namespaces}, false)
		got := map[string]string{}
		for _, r := range results {
			t.Logf("%s %s %s: %s (%d bytes) %s; %s", r.Kind, r.Namespace, r.Name, r.Outcome, r.Bytes, r.Why, r.Detail)
			if r.Kind == leftoverkind.OldLease || r.Kind == leftoverkind.HeldLease {
				got[r.Namespace+" "+r.Name] = string(r.Kind) + " " + string(r.Outcome) + " " + r.Detail
			}
		}
		return got
	}
	// Docker's and BuildKit's leases of their own namespaces are not
	// listed; BuildKit's in k8s.io is, as held.
	want := map[string]string{
		"k8s.io " + expired:      "old-lease reclaimed ",
		"k8s.io " + killed:       "old-lease reclaimed ",
		"k8s.io " + shared.Lease: "held-lease leftover ",
		"moby " + forgotten:      "old-lease leftover namespace moby is not named for reclaiming",
	}
	if diff := cmp.Diff(want, reclaimLeases(nil)); diff != "" {
		t.Errorf("leases, by default (-want +got):\n%s", diff)
	}
	if n.HasLease(t, testleftovers.CRINamespace, expired) || n.HasBlob(t, testleftovers.CRINamespace, digest.FromBytes(expiredBlob).String()) {
		t.Error("the expired lease, or the blob only it held, is still there")
	}
	if n.HasLease(t, testleftovers.CRINamespace, killed) {
		t.Error("the killed import's lease is still there")
	}
	for _, b := range killedBlobs {
		if n.HasBlob(t, testleftovers.CRINamespace, b) {
			t.Errorf("blob %s, which only the killed import's lease held, is still there", b)
		}
	}
	others := func(when string) {
		t.Helper()
		for _, c := range []struct {
			what string
			ok   bool
		}{
			{"Docker's container lease", n.HasLease(t, "moby", docker.ID)},
			{"Docker's container snapshot", n.HasSnapshot(t, "moby", docker.ID)},
			{"BuildKit's lease", n.HasLease(t, "buildkit", buildkit.Lease)},
			{"BuildKit's blob", n.HasBlob(t, "buildkit", buildkit.Blob)},
			{"BuildKit's snapshot", n.HasSnapshot(t, "buildkit", buildkit.Snapshot)},
			{"BuildKit's lease in k8s.io", n.HasLease(t, testleftovers.CRINamespace, shared.Lease)},
			{"BuildKit's blob in k8s.io", n.HasBlob(t, testleftovers.CRINamespace, shared.Blob)},
			{"BuildKit's snapshot in k8s.io", n.HasSnapshot(t, testleftovers.CRINamespace, shared.Snapshot)},
		} {
			if !c.ok {
				t.Errorf("%s: %s is gone", when, c.what)
			}
		}
		if b, err := os.ReadFile(docker.File); err != nil || string(b) != "a container's data" {
			t.Errorf("%s: the file Docker's container wrote: %q, %v", when, b, err)
		}
	}
	others("by default")

	// Namespaces named: a forgotten pull's lease there goes; Docker's and
	// BuildKit's stay.
	want = map[string]string{
		"k8s.io " + shared.Lease: "held-lease leftover ",
		"moby " + forgotten:      "old-lease reclaimed ",
	}
	if diff := cmp.Diff(want, reclaimLeases(map[string]bool{"moby": true, "buildkit": true})); diff != "" {
		t.Errorf("leases, moby and buildkit named (-want +got):\n%s", diff)
	}
	others("moby and buildkit named")
}

// TestReclaimKeepsRetaggedNames: an image of a named namespace is deleted
// only while each of its names points where it pointed when the node was
// read. A pull that re-points one of its names at another image in
// between (a new version under the same tag) keeps the image, with why,
// and the image the name now names; an image another client deleted in
// between is reported gone, not reclaimed.
func TestReclaimKeepsRetaggedNames(t *testing.T) {
	n := startNode(t)
	app := image(t, "example.com/retag/app:1", 2*mib)
	app.Tags = append(app.Tags, "example.com/retag/app:stable")
	newer := image(t, "example.com/retag/app:2", 2*mib)
	n.ImportInto(t, "default", app, newer, image(t, "example.com/retag/gone:1", 1*mib))

	client := n.Containerd.Client(t)
	found, err := reclaim.Find(context.Background(), client, "", reclaim.Ages{Lease: 0}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testleftovers.In("default")
	oldTarget := mustGet(t, n, "default", "example.com/retag/app:stable").Target.Digest
	newTarget, err := n.Client.ImageService().Get(ctx, "example.com/retag/app:2")
	if err != nil {
		t.Fatal(err)
	}
	retagged, err := n.Client.ImageService().Get(ctx, "example.com/retag/app:1")
	if err != nil {
		t.Fatal(err)
	}
	retagged.Target = newTarget.Target
	if _, err := n.Client.ImageService().Update(ctx, retagged, "target"); err != nil {
		t.Fatal(err)
	}
	if err := n.Client.ImageService().Delete(ctx, "example.com/retag/gone:1"); err != nil {
		t.Fatal(err)
	}

	results := reclaim.Run(context.Background(), client, client, found, reclaim.Policy{Kinds: map[leftoverkind.Kind]bool{leftoverkind.OtherNamespace: true}, Namespaces: map[string]bool{"default": true}}, false)
	got := map[string]string{}
	for _, r := range results {
		t.Logf("%s %s %s: %s (%d bytes) %s", r.Kind, r.Namespace, r.Name, r.Outcome, r.Bytes, r.Detail)
		if r.Namespace == "default" {
			got[r.Name] = string(r.Outcome) + ": " + r.Detail
		}
	}
	want := map[string]string{
		"example.com/retag/app:1 (and 1 more names)": "kept: example.com/retag/app:1 points at " + newTarget.Target.Digest.String() + ", not at " + oldTarget.String() + " as when the node was read: a pull or a retag since",
		"example.com/retag/app:2":                    "kept: a record named example.com/retag/app:1 appeared since the node was read",
		"example.com/retag/gone:1":                   "gone: already gone: deleted by something else since the node was read",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for name, target := range map[string]string{"example.com/retag/app:1": newTarget.Target.Digest.String(), "example.com/retag/app:stable": oldTarget.String()} {
		img, ok := n.Image(t, "default", name)
		switch {
		case !ok:
			t.Errorf("%s is gone", name)
		case img.Target().Digest.String() != target:
			t.Errorf("%s points at %s, want %s", name, img.Target().Digest, target)
		default:
			if unpacked, err := img.IsUnpacked(ctx, testleftovers.Snapshotter); err != nil || !unpacked {
				t.Errorf("%s's content or snapshot is gone (unpacked: %v, %v)", name, unpacked, err)
			}
		}
	}
}
