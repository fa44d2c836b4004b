//go:build !windows

package reclaim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/leases"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/ctrdrecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
)

// pinnedLabel is the label containerd's CRI pins an image record with.
const pinnedLabel = "io.cri-containerd.pinned"

// reclaimContainerd deletes each leftover through containerd's own API,
// after a re-check of it against the records and the containers as they
// are right then.
func reclaimContainerd(ctx context.Context, socket string, rt Runtime, take []leftover.Leftover, p Policy, dryRun bool) []Result {
	fail := func(err error) []Result {
		out := make([]Result, 0, len(take))
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: Failed, Detail: err.Error()})
		}
		return out
	}
	c, err := containerd.New(socket)
	if err != nil {
		return fail(fmt.Errorf("connecting to containerd: %w", err))
	}
	defer c.Close()
	r := reclaimer{c: c, socket: socket, rt: rt, p: p, protect: p.Protect.Prepare(), dryRun: dryRun}
	var out []Result
	var unreferenced []leftover.Leftover
	for _, l := range take {
		switch l.Kind {
		case leftover.UnnamedImage, leftover.OtherNamespace:
			out = append(out, r.image(ctx, l))
		case leftover.OldLease:
			out = append(out, r.lease(ctx, l))
		case leftover.Unreferenced:
			unreferenced = append(unreferenced, l)
		default:
			out = append(out, Result{Leftover: l, Outcome: Found, Detail: "not reclaimed on containerd"})
		}
	}
	return append(out, r.collect(ctx, unreferenced)...)
}

type reclaimer struct {
	c       *containerd.Client
	socket  string
	rt      Runtime
	p       Policy
	protect protect.Policy
	dryRun  bool
}

// image re-checks an image leftover and deletes its records, the last
// one synchronously: containerd's garbage collector has freed its content
// and snapshots when the deletion returns.
func (r reclaimer) image(ctx context.Context, l leftover.Leftover) Result {
	res := Result{Leftover: l}
	ctx = namespaces.WithNamespace(ctx, l.Namespace)
	if why, err := r.imageProtected(ctx, l); err != nil {
		res.Outcome, res.Detail = Failed, "re-check: "+err.Error()
		return res
	} else if why != "" {
		res.Outcome, res.Detail = Kept, why
		return res
	}
	if r.dryRun {
		res.Outcome = WouldReclaim
		return res
	}
	for i, name := range l.Records {
		var opts []images.DeleteOpt
		if i == len(l.Records)-1 {
			opts = append(opts, images.SynchronousDelete())
		}
		if err := r.c.ImageService().Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
			res.Outcome, res.Detail = Failed, fmt.Sprintf("deleting image record %s: %v", name, err)
			return res
		}
	}
	res.Outcome = Reclaimed
	return res
}

// imageProtected says why an image leftover must stay, read right before
// its deletion: a record of it gained a name a pod can use (a pull of it
// is under way), the runtime pins it, an exclusion protects it, or a
// container of the kubelet's or of its namespace uses it.
func (r reclaimer) imageProtected(ctx context.Context, l leftover.Leftover) (string, error) {
	target := ""
	img := cri.Image{}
	for _, name := range l.Records {
		rec, err := r.c.ImageService().Get(ctx, name)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		target = rec.Target.Digest.String()
		if rec.Labels[pinnedLabel] == "pinned" {
			img.Pinned = true
		}
		addName(&img, name)
	}
	if target == "" {
		return "already gone", nil
	}
	all, err := r.c.ImageService().List(ctx, "target.digest=="+target)
	if err != nil {
		return "", err
	}
	for _, rec := range all {
		if !slices.Contains(l.Records, rec.Name) {
			return "a record named " + rec.Name + " appeared since the node was read", nil
		}
	}
	var used protect.Containers
	if l.Namespace == CRINamespace {
		containers, err := r.rt.ListContainers(ctx)
		if err != nil {
			return "", err
		}
		used = protect.NewContainers(containers)
	}
	if v := r.protect.Check(img, protect.Keys(img), used); v.Reason != protect.Removable {
		return string(v.Reason) + ": " + v.Detail, nil
	}
	cs, err := r.c.ContainerService().List(ctx)
	if err != nil {
		return "", err
	}
	for _, ct := range cs {
		if slices.Contains(l.Records, ct.Image) {
			return "in use: container " + ct.ID + " of namespace " + l.Namespace, nil
		}
	}
	return "", nil
}

// addName files a record's name as the CRI would show it: an ID, a
// digest reference, or a tag.
func addName(img *cri.Image, name string) {
	switch {
	case idName(name):
		img.ID = name
	case strings.Contains(name, "@"):
		img.Digests = append(img.Digests, name)
	default:
		img.Tags = append(img.Tags, name)
	}
}

func idName(s string) bool { return len(s) == len("sha256:")+64 && strings.HasPrefix(s, "sha256:") }

// lease deletes a lease still older than the policy's age, synchronously.
func (r reclaimer) lease(ctx context.Context, l leftover.Leftover) Result {
	res := Result{Leftover: l}
	ctx = namespaces.WithNamespace(ctx, l.Namespace)
	ls, err := r.c.LeasesService().List(ctx, "id=="+l.Name)
	if err != nil {
		res.Outcome, res.Detail = Failed, "re-check: "+err.Error()
		return res
	}
	if len(ls) == 0 {
		res.Outcome, res.Detail = Kept, "already gone"
		return res
	}
	if age := time.Since(ls[0].CreatedAt); age < r.p.LeaseAge {
		res.Outcome, res.Detail = Kept, fmt.Sprintf("made %s ago, under the lease age", age.Round(time.Second))
		return res
	}
	if r.dryRun {
		res.Outcome = WouldReclaim
		return res
	}
	if err := r.c.LeasesService().Delete(ctx, ls[0], leases.SynchronousDelete); err != nil && !errdefs.IsNotFound(err) {
		res.Outcome, res.Detail = Failed, "deleting the lease: "+err.Error()
		return res
	}
	res.Outcome = Reclaimed
	return res
}

// collect has containerd's garbage collector run now, which deletes
// whatever nothing holds (sweep), when the policy reclaims unreferenced
// leftovers, found or not. Its own rules decide; whatever is still there
// afterwards is kept.
func (r reclaimer) collect(ctx context.Context, unreferenced []leftover.Leftover) []Result {
	if !r.p.Kinds[leftover.Unreferenced] {
		return nil
	}
	out := make([]Result, 0, len(unreferenced))
	if r.dryRun {
		for _, l := range unreferenced {
			out = append(out, Result{Leftover: l, Outcome: WouldReclaim})
		}
		return out
	}
	ctx = namespaces.WithNamespace(ctx, CRINamespace)
	err := r.sweep(ctx)
	var still map[string]bool
	if err == nil {
		still, err = r.unheld(ctx)
	}
	for _, l := range unreferenced {
		res := Result{Leftover: l, Outcome: Reclaimed, Detail: "collected by containerd's garbage collector"}
		switch {
		case err != nil:
			res.Outcome, res.Detail = Failed, "running containerd's garbage collector: "+err.Error()
		case still[l.Namespace+"/"+l.Name]:
			res.Outcome, res.Detail = Kept, "still there after a collection: containerd keeps it"
		}
		out = append(out, res)
	}
	if err != nil && len(unreferenced) == 0 {
		// Nothing was found, but the sweep failed: said, not lost.
		out = append(out, Result{Leftover: leftover.Leftover{Kind: leftover.Unreferenced, Namespace: CRINamespace, Name: "containerd's stores",
			Why: "what no record names, swept by containerd's garbage collector"}, Outcome: Failed, Detail: "running containerd's garbage collector: " + err.Error()})
	}
	return out
}

// sweep has containerd's garbage collector run and sweep its stores.
// containerd has no call for a collection but a synchronous deletion, so
// a lease of our own is made and deleted. A collection deletes what
// nothing holds from containerd's metadata, and only then from the content
// store and the snapshotters, each swept only when the collection deleted
// something of its own: what a collection cut short (containerd killed
// between the two) left on disk no record names, no listing shows, and
// containerd keeps until a later collection happens to sweep that store.
// So the lease holds a blob and an empty snapshot of every snapshotter the
// node uses, and its deletion collects them: every such store is swept.
func (r reclaimer) sweep(ctx context.Context) error {
	lease, err := r.c.LeasesService().Create(ctx, leases.WithRandomID(), leases.WithExpiration(time.Minute))
	if err != nil {
		return err
	}
	held := leases.WithLease(ctx, lease.ID)
	ref := "eraser-sweep-" + lease.ID
	data := []byte(ref)
	desc := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := content.WriteBlob(held, r.c.ContentStore(), ref, bytes.NewReader(data), desc); err != nil {
		return errors.Join(fmt.Errorf("writing the blob that sweeps the content store: %w", err), r.c.LeasesService().Delete(ctx, lease))
	}
	snapshotters, err := r.usedSnapshotters(ctx)
	if err != nil {
		return errors.Join(err, r.c.LeasesService().Delete(ctx, lease))
	}
	for _, sn := range snapshotters {
		// A snapshotter that cannot make one (it needs its own setup) is
		// not swept: nothing of ours is in it either.
		_, _ = r.c.SnapshotService(sn).Prepare(held, ref, "")
	}
	return r.c.LeasesService().Delete(ctx, lease, leases.SynchronousDelete)
}

var errFound = errors.New("found")

// usedSnapshotters are the loaded snapshotters that hold a snapshot in
// some namespace: the node's (the CRI's holds at least its sandbox
// image's). One that holds none is not swept: preparing a snapshot in it
// would make its database.
func (r reclaimer) usedSnapshotters(ctx context.Context) ([]string, error) {
	loaded, err := ctrdrecords.LoadedSnapshotters(ctx, r.c)
	if err != nil {
		return nil, err
	}
	nss, err := r.c.NamespaceService().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sn := range loaded {
		for _, ns := range nss {
			err := r.c.SnapshotService(sn).Walk(namespaces.WithNamespace(ctx, ns), func(context.Context, snapshots.Info) error { return errFound })
			if errors.Is(err, errFound) {
				out = append(out, sn)
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing snapshotter %s: %w", sn, err)
			}
		}
	}
	return out, nil
}

// unheld are what nothing holds now, by namespace and name.
func (r reclaimer) unheld(ctx context.Context) (map[string]bool, error) {
	records, err := ctrdrecords.Read(ctx, r.socket)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, u := range ctrdrecords.NewGraph(records).Unheld() {
		out[u.Namespace+"/"+u.ID] = true
	}
	return out, nil
}
