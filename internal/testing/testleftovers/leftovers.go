//go:build linux

// Package testleftovers makes, on a private containerd (testcontainerd),
// each kind of leftover image removals leave behind, through containerd's
// own API as the field's cases left them, and checks a listing of them:
// the worker tier lists them with the Linux command, the Windows tier with
// the Windows command through a named pipe.
package testleftovers

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
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

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

const mib = 1 << 20

// CRINamespace is the kubelet's namespace, where the CRI's images are.
const CRINamespace = "k8s.io"

// K8s is a context in the kubelet's namespace.
func K8s() context.Context {
	return namespaces.WithNamespace(context.Background(), CRINamespace)
}

// Node is a private containerd with a client of its own API.
type Node struct {
	*testcontainerd.Containerd
	Client *containerd.Client
}

// New connects to c's API; the test's cleanup closes the client.
func New(t testing.TB, c *testcontainerd.Containerd) Node {
	t.Helper()
	client, err := containerd.New(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return Node{c, client}
}

// IDOnly imports img and leaves only its ID record, the one a CRI pull
// makes beside the names (an import makes none): what a CRI removal cut
// short between the names and the ID leaves (containerd#13875), pinning
// the image's content and snapshot. It returns the ID.
func (n Node) IDOnly(t testing.TB, img testimage.Image) string {
	t.Helper()
	n.Import(t, img)
	id := n.ImageIDs(t)[img.Tags[0]]
	tagged, err := n.Client.ImageService().Get(K8s(), img.Tags[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.ImageService().Create(K8s(), images.Image{Name: id, Target: tagged.Target, Labels: tagged.Labels}); err != nil && !errdefs.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	records, err := n.Client.ImageService().List(K8s(), "target.digest=="+tagged.Target.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range records {
		if r.Name != id {
			names = append(names, r.Name)
		}
	}
	n.Ctr(t, append([]string{"images", "rm"}, names...)...)
	return id
}

// Pin labels an image record as containerd's CRI pins one.
func (n Node) Pin(t testing.TB, name string) {
	t.Helper()
	img, err := n.Client.ImageService().Get(K8s(), name)
	if err != nil {
		t.Fatal(err)
	}
	img.Labels = map[string]string{"io.cri-containerd.pinned": "pinned"}
	if _, err := n.Client.ImageService().Update(K8s(), img, "labels.io.cri-containerd.pinned"); err != nil {
		t.Fatal(err)
	}
}

// ImportInto imports the images into namespace ns with ctr, as a user
// does (ctr, nerdctl and build tools use namespaces of their own).
func (n Node) ImportInto(t testing.TB, ns string, imgs ...testimage.Image) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := testimage.WriteArchive(archive, imgs); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ctr", "--address", n.Socket, "--namespace", ns, "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr -n %s images import: %v\n%s", ns, err, out)
	}
}

// Lease makes a lease of the kubelet's namespace named id, without an
// expiry: a client's that holds what it names on purpose, not a pull's.
func (n Node) Lease(t testing.TB, id string) leases.Lease {
	t.Helper()
	l, err := n.Client.LeasesService().Create(K8s(), leases.WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Blob writes data into the content store under the lease leaseID of the
// kubelet's namespace, labelled.
func (n Node) Blob(t testing.TB, leaseID string, data []byte, labels map[string]string) {
	t.Helper()
	n.BlobIn(t, CRINamespace, leaseID, data, labels)
}

// BlobIn writes data into the content store under the lease leaseID of
// namespace ns, labelled.
func (n Node) BlobIn(t testing.TB, ns, leaseID string, data []byte, labels map[string]string) {
	t.Helper()
	ctx := leases.WithLease(In(ns), leaseID)
	dgst := digest.FromBytes(data)
	desc := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: dgst, Size: int64(len(data))}
	if err := content.WriteBlob(ctx, n.Client.ContentStore(), dgst.String(), bytes.NewReader(data), desc, content.WithLabels(labels)); err != nil {
		t.Fatal(err)
	}
}

// Collect has containerd's garbage collector run now (a synchronous
// deletion of a lease of its own), so that what an import left for its
// next collection is gone and listings made afterwards agree.
func (n Node) Collect(t testing.TB) {
	t.Helper()
	l, err := n.Client.LeasesService().Create(K8s(), leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Client.LeasesService().Delete(K8s(), l, leases.SynchronousDelete); err != nil {
		t.Fatal(err)
	}
}

// Made are the leftovers Make made, one of each kind, and the image it
// imported that is none.
type Made struct {
	// UnnamedID is the ID record of an image whose names are gone.
	UnnamedID string
	// OtherNamespace is an image of namespace "default".
	OtherNamespace string
	// Lease is the ID of a lease of containerd's own client that no one
	// ended: an old-lease under a lease age of zero.
	Lease string
	// Root is content labelled as a garbage-collection root.
	Root string
	// Kept is an image of the kubelet's with its name: not a leftover.
	Kept string
}

// Make makes one leftover of each kind containerd leaves:
//   - an image whose named records a removal deleted and whose ID record
//     it did not (containerd#13875): 3 MiB of random bytes, twice (its
//     blob and its snapshot);
//   - an image in namespace default, 2 MiB twice;
//   - a lease an import never ended, made as containerd's own client
//     makes it (a random ID, an expiry a day later), holding a 1 MiB blob
//     nothing else holds;
//   - a blob of 1 MiB and a byte labelled containerd.io/gc.root, whose own
//     lease ended;
//
// and an image of the kubelet's with its name, which is none.
func Make(t testing.TB, n Node) Made {
	t.Helper()
	m := Made{OtherNamespace: "example.com/leftover/other:1", Kept: "example.com/leftover/kept:1"}
	n.Import(t, testimage.Image{Tags: []string{m.Kept}, RandomBytes: 1 * mib})
	m.UnnamedID = n.IDOnly(t, testimage.Image{Tags: []string{"example.com/leftover/cut:1"}, RandomBytes: 3 * mib})
	n.ImportInto(t, "default", testimage.Image{Tags: []string{m.OtherNamespace}, RandomBytes: 2 * mib})
	m.Lease = n.ClientLease(t, CRINamespace)
	n.Blob(t, m.Lease, bytes.Repeat([]byte("l"), 1*mib), nil)
	// The root's own lease ends: its label alone keeps it.
	rootLease := n.Lease(t, "root-writer")
	rooted := bytes.Repeat([]byte("r"), 1*mib+1)
	n.Blob(t, rootLease.ID, rooted, map[string]string{"containerd.io/gc.root": time.Now().UTC().Format(time.RFC3339)})
	if err := n.Client.LeasesService().Delete(K8s(), rootLease); err != nil {
		t.Fatal(err)
	}
	m.Root = digest.FromBytes(rooted).String()
	return m
}

// Missing says which of the made leftovers a listing (with a lease age of
// zero) lacks or sizes below what only it holds, and which of the
// kubelet's images it lists; empty when the listing is right.
func (m Made) Missing(found []leftover.Leftover) []string {
	var out []string
	want := []struct {
		kind    leftoverkind.Kind
		name    string
		atLeast uint64
	}{
		{leftoverkind.UnnamedImage, m.UnnamedID, 2 * 3 * mib},
		{leftoverkind.OtherNamespace, m.OtherNamespace, 2 * 2 * mib},
		// The lease holds the blob no root holds; the rooted blob is its own.
		{leftoverkind.OldLease, m.Lease, 1 * mib},
		{leftoverkind.GCRoot, m.Root, 1*mib + 1},
	}
	for _, w := range want {
		l, ok := Find(found, w.kind, w.name)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("no %s leftover named %s", w.kind, w.name))
		case l.Bytes < w.atLeast:
			out = append(out, fmt.Sprintf("%s %s holds %d bytes, want at least %d", w.kind, l.Name, l.Bytes, w.atLeast))
		}
	}
	for _, l := range found {
		if strings.Contains(l.Name, m.Kept) || strings.Contains(l.Name, testcontainerd.SandboxImage) {
			out = append(out, fmt.Sprintf("the kubelet's image %s is listed as %s", l.Name, l.Kind))
		}
	}
	return out
}

// checkFound is whether a record was there: err nil, or containerd's
// NotFound; any other error fails the test.
func checkFound(t testing.TB, err error) bool {
	t.Helper()
	if errdefs.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// Find is the leftover of kind whose name starts with name.
func Find(found []leftover.Leftover, kind leftoverkind.Kind, name string) (leftover.Leftover, bool) {
	for _, l := range found {
		if l.Kind == kind && strings.HasPrefix(l.Name, name) {
			return l, true
		}
	}
	return leftover.Leftover{}, false
}
