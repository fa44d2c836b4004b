//go:build linux

// What other clients of the node's containerd keep by leases, made as
// they make it, through containerd's own client: a pull's or an import's
// lease (containerd's own clients), Docker's per-container lease, BuildKit's
// cache lease. Reclaim must tell the first, forgotten, from the others,
// held on purpose.

package testleftovers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// Snapshotter is the private containerd's snapshotter (containerdconfig).
const Snapshotter = "overlayfs"

// In is a context in namespace ns.
func In(ns string) context.Context {
	return namespaces.WithNamespace(context.Background(), ns)
}

// ClientLease makes the lease containerd's own client makes for a pull or
// an import (its WithLease: a random ID, an expiry a day later), in
// namespace ns, and never ends it, as a client killed mid-pull; it
// returns its ID.
func (n Node) ClientLease(t testing.TB, ns string) string {
	t.Helper()
	ctx, _, err := n.Client.WithLease(In(ns))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := leases.FromContext(ctx)
	return id
}

// ExpiredLease makes a lease shaped as a pull's whose expiry has just
// passed, in namespace ns, holding data: what a pull's client left and is
// done with. containerd's garbage collector drops an expired lease at
// its next collection, which a deletion anywhere starts: so one is run
// first, and none is pending while the lease is there, until the test
// deletes something.
func (n Node) ExpiredLease(t testing.TB, ns string, data []byte) string {
	t.Helper()
	n.Collect(t)
	l, err := n.Client.LeasesService().Create(In(ns), leases.WithRandomID(),
		leases.WithLabels(map[string]string{"containerd.io/gc.expire": time.Now().Add(-time.Minute).Format(time.RFC3339)}))
	if err != nil {
		t.Fatal(err)
	}
	n.BlobIn(t, ns, l.ID, data, nil)
	return l.ID
}

// DockerContainer is what Docker Engine with the containerd image store
// keeps of a container on the node's containerd.
type DockerContainer struct {
	// ID is the container's, and its lease's and its snapshot's key.
	ID string
	// File is a file the container wrote, in its snapshot's upper
	// directory.
	File string
}

// DockerContainer imports img into namespace moby and makes a container
// of it as Docker does: a lease named after the container, without
// labels or expiry (Docker ends it when the container is removed),
// holding the container's active snapshot on the image's chain, into
// which the container wrote a file.
func (n Node) DockerContainer(t testing.TB, img testimage.Image) DockerContainer {
	t.Helper()
	const ns = "moby"
	n.ImportInto(t, ns, img)
	ctx := In(ns)
	image, err := n.Client.GetImage(ctx, img.Tags[0])
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := image.IsUnpacked(ctx, Snapshotter); err != nil {
		t.Fatal(err)
	} else if !ok {
		if err := image.Unpack(ctx, Snapshotter); err != nil {
			t.Fatal(err)
		}
	}
	diffIDs, err := image.RootFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := DockerContainer{ID: randomHex(t, 32)}
	if _, err := n.Client.LeasesService().Create(ctx, leases.WithID(c.ID)); err != nil {
		t.Fatal(err)
	}
	mounts, err := n.Client.SnapshotService(Snapshotter).Prepare(leases.WithLease(ctx, c.ID), c.ID, identity.ChainID(diffIDs).String())
	if err != nil {
		t.Fatal(err)
	}
	c.File = filepath.Join(upperDir(t, mounts), "data")
	if err := os.WriteFile(c.File, []byte("a container's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

// BuildKitCache is what BuildKit keeps of its cache on the node's
// containerd.
type BuildKitCache struct {
	// Lease holds the cache.
	Lease string
	// Blob is a blob of the cache, Snapshot a committed snapshot.
	Blob, Snapshot string
}

// BuildKitCache makes BuildKit's cache as BuildKit does, in namespace ns
// (buildkit, or k8s.io where it shares the kubelet's images): a lease
// labelled containerd.io/gc.flat without expiry, holding a blob of data
// and a committed snapshot with a file in it.
func (n Node) BuildKitCache(t testing.TB, ns string, data []byte) BuildKitCache {
	t.Helper()
	ctx := In(ns)
	c := BuildKitCache{Lease: randomHex(t, 12), Blob: digest.FromBytes(data).String()}
	if _, err := n.Client.LeasesService().Create(ctx, leases.WithID(c.Lease),
		leases.WithLabels(map[string]string{"containerd.io/gc.flat": time.Now().UTC().Format(time.RFC3339Nano)})); err != nil {
		t.Fatal(err)
	}
	n.BlobIn(t, ns, c.Lease, data, nil)
	held := leases.WithLease(ctx, c.Lease)
	sn := n.Client.SnapshotService(Snapshotter)
	active := "extract-" + c.Lease
	mounts, err := sn.Prepare(held, active, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(upperDir(t, mounts), "cache"), []byte("a build step's output"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Snapshot = "buildkit-" + c.Lease
	if err := sn.Commit(held, c.Snapshot, active); err != nil {
		t.Fatal(err)
	}
	return c
}

// upperDir is where an active snapshot's writes land: overlayfs's upper
// directory, or the directory bound where the snapshot has no parent.
func upperDir(t testing.TB, mounts []mount.Mount) string {
	t.Helper()
	for _, m := range mounts {
		if m.Type == "bind" {
			return m.Source
		}
		for _, o := range m.Options {
			if dir, ok := strings.CutPrefix(o, "upperdir="); ok {
				return dir
			}
		}
	}
	t.Fatalf("no upper directory in the snapshot's mounts %+v", mounts)
	return ""
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// HasSnapshot tells whether namespace ns's snapshotter holds key, as ctr
// snapshots info does.
func (n Node) HasSnapshot(t testing.TB, ns, key string) bool {
	t.Helper()
	_, err := n.Client.SnapshotService(Snapshotter).Stat(In(ns), key)
	return checkFound(t, err)
}

// HasBlob tells whether namespace ns's content store holds dgst, as ctr
// content get does.
func (n Node) HasBlob(t testing.TB, ns, dgst string) bool {
	t.Helper()
	_, err := n.Client.ContentStore().Info(In(ns), digest.Digest(dgst))
	return checkFound(t, err)
}

// HasLease tells whether namespace ns holds the lease id, as ctr leases
// ls does.
func (n Node) HasLease(t testing.TB, ns, id string) bool {
	t.Helper()
	ls, err := n.Client.LeasesService().List(In(ns), "id=="+id)
	if err != nil {
		t.Fatal(err)
	}
	return len(ls) > 0
}

// Image is namespace ns's image record name, as ctr images ls shows it.
func (n Node) Image(t testing.TB, ns, name string) (containerd.Image, bool) {
	t.Helper()
	img, err := n.Client.GetImage(In(ns), name)
	if !checkFound(t, err) {
		return nil, false
	}
	return img, true
}

// KilledImport starts "ctr images import" of img into namespace ns and
// kills it once its lease holds a blob: the lease containerd's own client
// made (ctr's, whichever containerd version it is), never ended. It
// returns the lease's ID and the blobs it holds.
func (n Node) KilledImport(t testing.TB, ns string, img testimage.Image) (string, []string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := testimage.WriteArchive(archive, []testimage.Image{img}); err != nil {
		t.Fatal(err)
	}
	ctx := In(ns)
	before := map[string]bool{}
	ls, err := n.Client.LeasesService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		before[l.ID] = true
	}
	cmd := exec.Command("ctr", "--address", n.Socket, "--namespace", ns, "images", "import", archive)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("ctr images import ended (%v) before its lease was seen", err)
		default:
		}
		ls, err := n.Client.LeasesService().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if before[l.ID] {
				continue
			}
			held, err := n.Client.LeasesService().ListResources(ctx, l)
			if err != nil && !errdefs.IsNotFound(err) {
				t.Fatal(err)
			}
			var blobs []string
			for _, r := range held {
				if r.Type == "content" {
					blobs = append(blobs, r.ID)
				}
			}
			if len(blobs) > 0 {
				_ = cmd.Process.Kill()
				<-done
				return l.ID, blobs
			}
		}
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	t.Fatal("ctr images import's lease held no blob within a minute")
	return "", nil
}
