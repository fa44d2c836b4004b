package leftover

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

func digest(name string) string { return fmt.Sprintf("sha256:%064x", name) }

// image is an image's content: its manifest, holding its config and
// layers by gc.ref labels; its config, holding its top snapshot.
func image(manifest, config, snapshot string, layers ...string) []containerdrecords.Blob {
	m := containerdrecords.Blob{Digest: digest(manifest), Bytes: 1 << 10, Labels: map[string]string{"containerd.io/gc.ref.content." + "config": digest(config)}}
	for i, l := range layers {
		m.Labels[fmt.Sprintf("%sl.%d", "containerd.io/gc.ref.content.", i)] = digest(l)
	}
	c := containerdrecords.Blob{Digest: digest(config), Bytes: 2 << 10, Labels: map[string]string{"containerd.io/gc.ref.snapshot." + "overlayfs": snapshot}}
	return []containerdrecords.Blob{m, c}
}

// clientLease is a lease as containerd's own clients make one for a pull
// or an import: a random ID, an expiry a day after its making.
func clientLease(id string, made time.Time, holds ...containerdrecords.Resource) containerdrecords.Lease {
	return containerdrecords.Lease{ID: id, CreatedAt: made, Labels: map[string]string{LabelExpire: made.Add(24 * time.Hour).Format(time.RFC3339)}, Resources: holds}
}

func layer(name string, bytes int64) containerdrecords.Blob {
	return containerdrecords.Blob{Digest: digest(name), Bytes: bytes}
}

// TestContainerd: each kind of leftover is found, with the bytes only it
// holds (a layer or snapshot another image shares is not counted), an
// image's records with the target each pointed at and a lease's record
// as read; the kubelet's named images, a running container's snapshot, a
// pull under way's lease and Docker's container lease are none.
func TestContainerd(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	const mib = 1 << 20
	// A pull under way; one whose client was killed two hours ago; one
	// whose expiry passed; one a tool holds on purpose (no expiry).
	pullNow := clientLease("100-pul_", now.Add(-time.Minute), containerdrecords.Resource{Type: "content", ID: digest("l-pulling")})
	killedPull := clientLease("200-kil-", now.Add(-2*time.Hour), containerdrecords.Resource{Type: "content", ID: digest("l-leased")})
	expired := containerdrecords.Lease{ID: "import-expired", CreatedAt: now.Add(-30 * time.Minute), Labels: map[string]string{LabelExpire: now.Add(-time.Minute).Format(time.RFC3339)},
		Resources: []containerdrecords.Resource{{Type: "content", ID: digest("l-expired")}}}
	heldByTool := containerdrecords.Lease{ID: "tool-cache", CreatedAt: now.Add(-24 * time.Hour * 300), Resources: []containerdrecords.Resource{{Type: "content", ID: digest("l-tool")}}}
	k8s := containerdrecords.Namespace{Name: "k8s.io",
		Images: []containerdrecords.Image{
			{Name: "example.com/app:1", Target: digest("m-app")},
			{Name: "example.com/app@" + digest("m-app"), Target: digest("m-app")},
			{Name: digest("c-app"), Target: digest("m-app")},
			// The #13875 shape: only the ID record is left.
			{Name: digest("c-gone"), Target: digest("m-gone")},
		},
		Snapshots: []containerdrecords.Snapshot{
			{Snapshotter: "overlayfs", Key: "s-base", Bytes: 20 * mib},
			{Snapshotter: "overlayfs", Key: "s-gone", Parent: "s-base", Bytes: 5 * mib},
			{Snapshotter: "overlayfs", Key: "rw-running", Parent: "s-base", Active: true, Bytes: 1 * mib},
			{Snapshotter: "overlayfs", Key: "s-orphan", Bytes: 3 * mib},
			{Snapshotter: "overlayfs", Key: "s-rooted", Bytes: 7 * mib, Labels: map[string]string{containerdrecords.LabelRoot: "2026-01-01T00:00:00Z"}},
		},
		Containers: []containerdrecords.Container{{ID: "running", Image: "example.com/app:1", Snapshotter: "overlayfs", SnapshotKey: "rw-running"}},
		Leases:     []containerdrecords.Lease{pullNow, killedPull, expired, heldByTool},
	}
	k8s.Content = append(k8s.Content, image("m-app", "c-app", "s-base", "l-base")...)
	k8s.Content = append(k8s.Content, image("m-gone", "c-gone", "s-gone", "l-base", "l-gone")...)
	k8s.Content = append(k8s.Content, layer("l-base", 10*mib), layer("l-gone", 4*mib), layer("l-pulling", 8*mib), layer("l-leased", 6*mib), layer("l-stray", 2*mib),
		layer("l-expired", 1*mib), layer("l-tool", 5*mib))
	other := containerdrecords.Namespace{Name: "default",
		Images:    []containerdrecords.Image{{Name: "docker.io/library/busybox:1.36", Target: digest("m-busybox")}, {Name: "docker.io/library/busybox:latest", Target: digest("m-busybox")}},
		Content:   append(image("m-busybox", "c-busybox", "s-busybox", "l-busybox", "l-base"), layer("l-busybox", 3*mib), layer("l-base", 10*mib)),
		Snapshots: []containerdrecords.Snapshot{{Snapshotter: "overlayfs", Key: "s-busybox", Bytes: 9 * mib}},
	}
	// Docker's container lease (no label) is its own and not listed; an
	// expired lease is listed wherever it is, for the policy to scope.
	mobyContainer := containerdrecords.Lease{ID: digest("container")[7:], CreatedAt: now.Add(-24 * time.Hour * 30), Resources: []containerdrecords.Resource{{Type: "snapshots/overlayfs", ID: "rw-docker"}}}
	mobyExpired := clientLease("300-exp_", now.Add(-25*time.Hour))
	moby := containerdrecords.Namespace{Name: "moby", Leases: []containerdrecords.Lease{mobyContainer, mobyExpired},
		Snapshots: []containerdrecords.Snapshot{{Snapshotter: "overlayfs", Key: "rw-docker", Active: true, Bytes: 2 * mib}}}
	got := map[string]Leftover{}
	for _, l := range Containerd(containerdrecords.Records{Namespaces: []containerdrecords.Namespace{k8s, other, moby}}, Options{CRINamespace: "k8s.io", LeaseAge: time.Hour, Now: now}) {
		l.Why = strings.SplitN(l.Why, " ", 2)[0] // the reason's gist; its text is the docs'
		got[l.Namespace+" "+l.Name] = l
	}
	meta := uint64(1<<10 + 2<<10) // a manifest and a config
	want := map[string]Leftover{
		"k8s.io " + digest("c-gone"): {Kind: leftoverkind.UnnamedImage, Namespace: "k8s.io", Name: digest("c-gone"), Bytes: meta + 4*mib + 5*mib, Why: "named", Records: []string{digest("c-gone")},
			Targets: map[string]string{digest("c-gone"): digest("m-gone")}},
		"default docker.io/library/busybox:1.36 (and 1 more names)": {Kind: leftoverkind.OtherNamespace, Namespace: "default", Name: "docker.io/library/busybox:1.36 (and 1 more names)",
			Bytes: meta + 3*mib + 9*mib, Why: "an", Records: []string{"docker.io/library/busybox:1.36", "docker.io/library/busybox:latest"},
			Targets: map[string]string{"docker.io/library/busybox:1.36": digest("m-busybox"), "docker.io/library/busybox:latest": digest("m-busybox")}},
		"k8s.io 200-kil-":           {Kind: leftoverkind.OldLease, Namespace: "k8s.io", Name: "200-kil-", Bytes: 6 * mib, Why: "a", Lease: &killedPull},
		"k8s.io import-expired":     {Kind: leftoverkind.OldLease, Namespace: "k8s.io", Name: "import-expired", Bytes: 1 * mib, Why: "a", Lease: &expired},
		"k8s.io tool-cache":         {Kind: leftoverkind.HeldLease, Namespace: "k8s.io", Name: "tool-cache", Bytes: 5 * mib, Why: "a", Lease: &heldByTool},
		"moby 300-exp_":             {Kind: leftoverkind.OldLease, Namespace: "moby", Name: "300-exp_", Why: "a", Lease: &mobyExpired},
		"k8s.io overlayfs/s-rooted": {Kind: leftoverkind.GCRoot, Namespace: "k8s.io", Name: "overlayfs/s-rooted", Bytes: 7 * mib, Why: "a"},
		" " + digest("l-stray"):     {Kind: leftoverkind.Unreferenced, Name: digest("l-stray"), Bytes: 2 * mib, Why: "content"},
		"k8s.io overlayfs/s-orphan": {Kind: leftoverkind.Unreferenced, Namespace: "k8s.io", Name: "overlayfs/s-orphan", Bytes: 3 * mib, Why: "a"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
