//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
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
)

// eraserNode runs "eraser node" against the runtime at endpoint.
func eraserNode(t *testing.T, endpoint string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "eraser"), append([]string{"node"}, args...)...)
	cmd.Env = append(os.Environ(), "ERASER_RUNTIME_ENDPOINT="+endpoint)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// leftoversOf lists the node's leftovers by kind and name.
func leftoversOf(t *testing.T, endpoint string, args ...string) map[leftover.Kind][]leftover.Leftover {
	t.Helper()
	out, stderr, code := eraserNode(t, endpoint, append([]string{"list", "--leftovers", "-o", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("list --leftovers: exit %d: %s", code, stderr)
	}
	var found []leftover.Leftover
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		t.Fatalf("list --leftovers -o json: %v\n%s", err, out)
	}
	byKind := map[leftover.Kind][]leftover.Leftover{}
	for _, l := range found {
		byKind[l.Kind] = append(byKind[l.Kind], l)
	}
	return byKind
}

// TestContainerdLeftovers makes each of containerd's leftovers through its
// own API, as the field's cases left them: an image whose named records a
// removal deleted and whose ID record it did not (containerd#13875), an
// image in another namespace, a lease an import never ended, content
// labelled as a garbage-collection root. "eraser node list --leftovers"
// finds each with the bytes only it holds; the kubelet's images are none.
func TestContainerdLeftovers(t *testing.T) {
	const mib = 1 << 20
	c := testcontainerd.Start(t)
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	endpoint := c.CRIEndpoint()
	// An import may leave a blob nothing holds until the next collection
	// (the archive's own index): listed, and nothing else.
	found := leftoversOf(t, endpoint)
	delete(found, leftover.Unreferenced)
	if len(found) != 0 {
		t.Fatalf("a fresh node has leftovers: %+v", found)
	}

	client, err := containerd.New(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	cut := testcontainerd.Image{Tags: []string{"example.com/leftover/cut:1"}, RandomBytes: 3 * mib}
	kept := testcontainerd.Image{Tags: []string{"example.com/leftover/kept:1"}, RandomBytes: 1 * mib}
	c.Import(t, cut, kept)
	ids := c.ImageIDs(t)
	cutID := ids["example.com/leftover/cut:1"]
	// The ID record a CRI pull makes beside the names (an import makes
	// none), then what an interrupted CRI removal leaves: the names gone,
	// the ID record there, pinning the image's content and snapshot.
	tagged, err := client.ImageService().Get(ctx, "example.com/leftover/cut:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.ImageService().Create(ctx, images.Image{Name: cutID, Target: tagged.Target, Labels: tagged.Labels}); err != nil && !errdefs.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	records, err := client.ImageService().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range records {
		if r.Target.Digest == tagged.Target.Digest && r.Name != cutID {
			names = append(names, r.Name)
		}
	}
	c.Ctr(t, append([]string{"images", "rm"}, names...)...)

	archive := filepath.Join(t.TempDir(), "other.tar")
	if err := testcontainerd.WriteArchive(archive, []testcontainerd.Image{{Tags: []string{"example.com/leftover/other:1"}, RandomBytes: 2 * mib}}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ctr", "--address", c.Socket, "--namespace", "default", "images", "import", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr -n default images import: %v\n%s", err, out)
	}

	lease, err := client.LeasesService().Create(ctx, leases.WithID("import-never-ended"))
	if err != nil {
		t.Fatal(err)
	}
	leased := bytes.Repeat([]byte("l"), 1*mib)
	writeBlob(t, leases.WithLease(ctx, lease.ID), client, leased, nil)
	// The root's own lease ends: its label alone keeps it.
	rootLease, err := client.LeasesService().Create(ctx, leases.WithRandomID())
	if err != nil {
		t.Fatal(err)
	}
	rooted := bytes.Repeat([]byte("r"), 1*mib+1)
	writeBlob(t, leases.WithLease(ctx, rootLease.ID), client, rooted, map[string]string{"containerd.io/gc.root": time.Now().UTC().Format(time.RFC3339)})
	if err := client.LeasesService().Delete(ctx, rootLease); err != nil {
		t.Fatal(err)
	}

	found = leftoversOf(t, endpoint, "--lease-age=0s")
	check := func(kind leftover.Kind, name string, atLeast uint64) {
		t.Helper()
		for _, l := range found[kind] {
			if strings.HasPrefix(l.Name, name) {
				if l.Bytes < atLeast {
					t.Errorf("%s %s holds %d bytes, want at least %d", kind, l.Name, l.Bytes, atLeast)
				}
				return
			}
		}
		t.Errorf("no %s leftover named %s; found %+v", kind, name, found)
	}
	// The cut image's blob and snapshot: twice its random bytes.
	check(leftover.UnnamedImage, cutID, 2*3*mib)
	check(leftover.OtherNamespace, "example.com/leftover/other:1", 2*2*mib)
	// The lease holds the blob no root holds; the rooted blob is its own.
	check(leftover.OldLease, "import-never-ended", 1*mib)
	check(leftover.GCRoot, digest.FromBytes(rooted).String(), 1*mib+1)
	for kind, ls := range found {
		for _, l := range ls {
			if strings.Contains(l.Name, "example.com/leftover/kept") || strings.Contains(l.Name, testcontainerd.SandboxImage) {
				t.Errorf("the kubelet's image %s is listed as %s", l.Name, kind)
			}
		}
	}
	// Under the default lease age the lease is a pull in progress.
	if l := leftoversOf(t, endpoint)[leftover.OldLease]; len(l) != 0 {
		t.Errorf("a lease made seconds ago is listed under the default age: %+v", l)
	}
}

func writeBlob(t *testing.T, ctx context.Context, client *containerd.Client, data []byte, labels map[string]string) {
	t.Helper()
	dgst := digest.FromBytes(data)
	err := content.WriteBlob(ctx, client.ContentStore(), dgst.String(), bytes.NewReader(data),
		ocispec.Descriptor{MediaType: "application/octet-stream", Digest: dgst, Size: int64(len(data))}, content.WithLabels(labels))
	if err != nil {
		t.Fatal(err)
	}
}
