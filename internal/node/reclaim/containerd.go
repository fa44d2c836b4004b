package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// pinnedLabel is the label containerd's CRI pins an image record with.
const pinnedLabel = "io.cri-containerd.pinned"

// reclaimContainerd deletes each leftover through containerd's own API at
// addr (its unix socket, or its named pipe on Windows), after a re-check
// of it against the records and the containers as they are right then.
func reclaimContainerd(ctx context.Context, addr endpoint.Address, rt Runtime, take []leftover.Leftover, p Policy, dryRun bool) []Result {
	fail := func(err error) []Result {
		out := make([]Result, 0, len(take))
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: Failed, Detail: err.Error()})
		}
		return out
	}
	c, err := containerdrecords.Dial(addr)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	r := reclaimer{c: c, rt: rt, p: p, protect: p.Protect.Prepare(), dryRun: dryRun}
	var out []Result
	var unreferenced []leftover.Leftover
	for _, l := range take {
		switch l.Kind {
		case leftoverkind.UnnamedImage, leftoverkind.OtherNamespace:
			out = append(out, r.image(ctx, l))
		case leftoverkind.OldLease:
			out = append(out, r.lease(ctx, l))
		case leftoverkind.Unreferenced:
			unreferenced = append(unreferenced, l)
		default:
			out = append(out, Result{Leftover: l, Outcome: Found, Detail: "not reclaimed on containerd"})
		}
	}
	return append(out, r.collect(ctx, unreferenced)...)
}

type reclaimer struct {
	c       *containerdrecords.Conn
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
	ctx = containerdrecords.InNamespace(ctx, l.Namespace)
	why, gone, err := r.imageProtected(ctx, l)
	switch {
	case err != nil:
		res.Outcome, res.Detail = Failed, "re-check: "+err.Error()
		return res
	case gone:
		return goneResult(res)
	case why != "":
		res.Outcome, res.Detail = Kept, why
		return res
	case r.dryRun:
		res.Outcome = WouldReclaim
		return res
	}
	var deleted, repointed []string
	synced := false
	for i, name := range l.Records {
		req := &imagesapi.DeleteImageRequest{Name: name, Sync: i == len(l.Records)-1}
		// containerd 2.x deletes the record only while it still points at
		// this target, and answers NotFound otherwise; 1.x ignores it, and
		// the re-check just made is what keeps a re-pointed name there.
		req.Target = &types.Descriptor{Digest: l.Targets[name]}
		_, err := r.c.Images().Delete(ctx, req)
		switch {
		case err == nil:
			deleted = append(deleted, name)
			synced = synced || req.Sync
		case !containerdrecords.IsNotFound(err):
			res.Outcome, res.Detail = Failed, fmt.Sprintf("deleting image record %s: %v", name, err)
			return res
		default:
			if _, err := r.c.Images().Get(ctx, &imagesapi.GetImageRequest{Name: name}); err == nil {
				repointed = append(repointed, name)
			}
		}
	}
	switch {
	case len(deleted) == 0 && len(repointed) > 0:
		res.Outcome, res.Detail = Kept, "re-pointed at another image during its deletion: "+strings.Join(repointed, ", ")
		return res
	case len(deleted) == 0:
		return goneResult(res)
	case !synced:
		// The last record was deleted by something else: what ours held
		// goes at a collection, made now so that it is freed on return.
		if err := r.collectNow(ctx); err != nil {
			res.Outcome, res.Detail = Failed, "records deleted, then running containerd's garbage collector: "+err.Error()
			return res
		}
	}
	res.Outcome = Reclaimed
	if len(repointed) > 0 {
		res.Detail = "kept, re-pointed at another image during the deletion: " + strings.Join(repointed, ", ")
	}
	return res
}

// goneResult is a leftover something else deleted since the node was
// read: no bytes of it are the reclaim's.
func goneResult(res Result) Result {
	res.Outcome, res.Detail = Gone, "already gone: deleted by something else since the node was read"
	res.Bytes = 0
	return res
}

// imageProtected says why an image leftover must stay, read right before
// its deletion: a record of it points elsewhere than when read, or one
// pointing at it gained a name a pull gave it, the runtime pins it, an
// exclusion protects it, or a container of the kubelet's or of its
// namespace uses it. gone: none of its records is there any more.
func (r reclaimer) imageProtected(ctx context.Context, l leftover.Leftover) (why string, gone bool, err error) {
	img := cri.Image{}
	var targets []string
	for _, name := range l.Records {
		resp, err := r.c.Images().Get(ctx, &imagesapi.GetImageRequest{Name: name})
		if containerdrecords.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", false, err
		}
		rec := resp.GetImage()
		target, judged := rec.GetTarget().GetDigest(), l.Targets[name]
		if target != judged {
			return fmt.Sprintf("%s points at %s, not at %s as when the node was read: a pull or a retag since", name, target, cmp.Or(judged, "what was judged")), false, nil
		}
		if !slices.Contains(targets, target) {
			targets = append(targets, target)
		}
		if rec.GetLabels()[pinnedLabel] == "pinned" {
			img.Pinned = true
		}
		addName(&img, name)
	}
	if len(targets) == 0 {
		return "", true, nil
	}
	for _, target := range targets {
		all, err := r.c.Images().List(ctx, &imagesapi.ListImagesRequest{Filters: []string{"target.digest==" + target}})
		if err != nil {
			return "", false, err
		}
		for _, rec := range all.GetImages() {
			if !slices.Contains(l.Records, rec.GetName()) {
				return "a record named " + rec.GetName() + " appeared since the node was read", false, nil
			}
		}
	}
	var used protect.Containers
	if l.Namespace == CRINamespace {
		containers, err := r.rt.ListContainers(ctx)
		if err != nil {
			return "", false, err
		}
		used = protect.NewContainers(containers)
	}
	if v := r.protect.Check(img, protect.Keys(img), used); v.Reason != protect.Removable {
		return string(v.Reason) + ": " + v.Detail, false, nil
	}
	cs, err := r.c.Containers().List(ctx, &containersapi.ListContainersRequest{})
	if err != nil {
		return "", false, err
	}
	for _, ct := range cs.GetContainers() {
		if slices.Contains(l.Records, ct.GetImage()) {
			return "in use: container " + ct.GetID() + " of namespace " + l.Namespace, false, nil
		}
	}
	return "", false, nil
}

// addName files a record's name as the CRI would show it: an ID, a
// digest reference, or a tag.
func addName(img *cri.Image, name string) {
	switch {
	case leftover.IsIDName(name):
		img.ID = name
	case strings.Contains(name, "@"):
		img.Digests = append(img.Digests, name)
	default:
		img.Tags = append(img.Tags, name)
	}
}

// lease re-reads a lease leftover and deletes it, synchronously, while it
// is the very lease judged (its making, labels and what it holds as read)
// and still an old lease by the policy's age.
func (r reclaimer) lease(ctx context.Context, l leftover.Leftover) Result {
	res := Result{Leftover: l}
	ctx = containerdrecords.InNamespace(ctx, l.Namespace)
	now, err := r.readLease(ctx, l.Name)
	switch {
	case containerdrecords.IsNotFound(err):
		return goneResult(res)
	case err != nil:
		res.Outcome, res.Detail = Failed, "re-check: "+err.Error()
		return res
	}
	if why := leaseChanged(l.Lease, now); why != "" {
		res.Outcome, res.Detail = Kept, why
		return res
	}
	if kind, why := leftover.JudgeLease(now, r.p.LeaseAge, time.Now()); kind != leftoverkind.OldLease {
		res.Outcome, res.Detail = Kept, "no longer an old lease: "+cmp.Or(why, "made less than the lease age ago")
		return res
	}
	if r.dryRun {
		res.Outcome = WouldReclaim
		return res
	}
	if _, err := r.c.Leases().Delete(ctx, &leasesapi.DeleteRequest{ID: l.Name, Sync: true}); containerdrecords.IsNotFound(err) {
		return goneResult(res)
	} else if err != nil {
		res.Outcome, res.Detail = Failed, "deleting the lease: "+err.Error()
		return res
	}
	res.Outcome = Reclaimed
	return res
}

// readLease reads the lease id of ctx's namespace as Read does; NotFound
// when it is not there.
func (r reclaimer) readLease(ctx context.Context, id string) (containerdrecords.Lease, error) {
	ls, err := r.c.Leases().List(ctx, &leasesapi.ListRequest{Filters: []string{"id==" + id}})
	if err != nil {
		return containerdrecords.Lease{}, err
	}
	i := slices.IndexFunc(ls.GetLeases(), func(l *leasesapi.Lease) bool { return l.GetID() == id })
	if i < 0 {
		return containerdrecords.Lease{}, status.Error(codes.NotFound, "lease "+id)
	}
	got := ls.GetLeases()[i]
	resources, err := r.c.Leases().ListResources(ctx, &leasesapi.ListResourcesRequest{ID: id})
	if err != nil {
		return containerdrecords.Lease{}, err
	}
	out := containerdrecords.Lease{ID: id, CreatedAt: got.GetCreatedAt().AsTime(), Labels: got.GetLabels()}
	for _, res := range resources.GetResources() {
		out.Resources = append(out.Resources, containerdrecords.Resource{Type: res.GetType(), ID: res.GetID()})
	}
	return out, nil
}

// leaseChanged says how a lease differs from the one judged: made anew
// under its ID, labelled otherwise (its expiry among its labels), or
// holding other content or snapshots; empty when it is the same.
func leaseChanged(judged *containerdrecords.Lease, now containerdrecords.Lease) string {
	switch {
	case judged == nil:
		return "its record was not read with it"
	case !judged.CreatedAt.Equal(now.CreatedAt):
		return "made anew since the node was read"
	case !maps.Equal(judged.Labels, now.Labels):
		return "its labels changed since the node was read"
	}
	key := func(r containerdrecords.Resource) string { return r.Type + " " + r.ID }
	was, is := sortedKeys(judged.Resources, key), sortedKeys(now.Resources, key)
	if !slices.Equal(was, is) {
		return fmt.Sprintf("what it holds changed since the node was read (%d resources then, %d now)", len(was), len(is))
	}
	return ""
}

func sortedKeys[T any](items []T, key func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, key(it))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// collectNow has containerd's garbage collector run now, and waits for
// it: a synchronous deletion of a lease of our own, which holds nothing.
func (r reclaimer) collectNow(ctx context.Context) error {
	id := fmt.Sprintf("eraser-collect-%d", time.Now().UnixNano())
	if _, err := r.c.Leases().Create(ctx, &leasesapi.CreateRequest{ID: id, Labels: map[string]string{leftover.LabelExpire: time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}}); err != nil {
		return err
	}
	_, err := r.c.Leases().Delete(ctx, &leasesapi.DeleteRequest{ID: id, Sync: true})
	return err
}

// collect has containerd's garbage collector run and sweep its stores,
// whenever the policy reclaims unreferenced leftovers, found or not: what
// no record names is in no listing (sweep). Its own rules decide; whatever
// is still there afterwards is kept.
func (r reclaimer) collect(ctx context.Context, unreferenced []leftover.Leftover) []Result {
	if !r.p.Kinds[leftoverkind.Unreferenced] {
		return nil
	}
	out := make([]Result, 0, len(unreferenced))
	if r.dryRun {
		for _, l := range unreferenced {
			out = append(out, Result{Leftover: l, Outcome: WouldReclaim})
		}
		return out
	}
	ctx = containerdrecords.InNamespace(ctx, CRINamespace)
	before := measureUsed(ctx, r.p.ImageFsUsed)
	err := r.sweep(ctx)
	var after used
	if err == nil {
		after = measureUsed(ctx, r.p.ImageFsUsed)
	}
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
	if swept, ok := sweptStores(before, after, out); ok && err == nil {
		out = append(out, swept)
	}
	if err != nil && len(unreferenced) == 0 {
		// Nothing was found, but the sweep failed: said, not lost.
		out = append(out, Result{Leftover: leftover.Leftover{Kind: leftoverkind.Unreferenced, Namespace: CRINamespace, Name: SweptStores,
			Why: "what no record names, swept by containerd's garbage collector"}, Outcome: Failed, Detail: "running containerd's garbage collector: " + err.Error()})
	}
	return out
}

// leaseHeader is containerd's gRPC header of the lease a call works under.
const leaseHeader = "containerd-lease"

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
// (A store is swept by its own clean-up: the content store and
// overlayfs have one; Windows' snapshotters have none, so there the
// collection deletes what no record holds and the content store's files,
// and a snapshot directory no record names stays.)
func (r reclaimer) sweep(ctx context.Context) error {
	// Its expiry lets containerd drop it should this process die first.
	id := fmt.Sprintf("eraser-sweep-%d", time.Now().UnixNano())
	if _, err := r.c.Leases().Create(ctx, &leasesapi.CreateRequest{ID: id, Labels: map[string]string{leftover.LabelExpire: time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}}); err != nil {
		return err
	}
	drop := func(err error) error {
		_, derr := r.c.Leases().Delete(ctx, &leasesapi.DeleteRequest{ID: id})
		return errors.Join(err, derr)
	}
	held := metadata.AppendToOutgoingContext(ctx, leaseHeader, id)
	if err := r.c.WriteBlob(held, id, []byte(id)); err != nil {
		return drop(fmt.Errorf("writing the blob that sweeps the content store: %w", err))
	}
	snapshotters, err := r.usedSnapshotters(ctx)
	if err != nil {
		return drop(err)
	}
	for _, sn := range snapshotters {
		// A snapshotter that cannot make one (it needs its own setup) is
		// not swept: nothing of ours is in it either.
		_, _ = r.c.Snapshots().Prepare(held, &snapshotsapi.PrepareSnapshotRequest{Snapshotter: sn, Key: sweepSnapshotKey(id)})
	}
	_, err = r.c.Leases().Delete(ctx, &leasesapi.DeleteRequest{ID: id, Sync: true})
	return err
}

// sweepSnapshotKey is the key of the sweep's empty snapshot. Its "extract-"
// prefix is the one containerd gives a snapshot a layer is unpacked into:
// Windows' snapshotters ("windows", "cimfs") then make only a directory,
// where for any other parentless snapshot they make a base layer's or
// refuse it; Linux's snapshotters read nothing into a key.
func sweepSnapshotKey(id string) string { return "extract-" + id }

// usedSnapshotters are the loaded snapshotters that hold a snapshot in
// some namespace: the node's (the CRI's holds at least its sandbox
// image's). One that holds none is not swept: preparing a snapshot in it
// would make its database.
func (r reclaimer) usedSnapshotters(ctx context.Context) ([]string, error) {
	loaded, err := r.c.LoadedSnapshotters(ctx)
	if err != nil {
		return nil, err
	}
	nss, err := r.c.NamespaceNames(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sn := range loaded {
		for _, ns := range nss {
			held, err := r.c.HasSnapshot(containerdrecords.InNamespace(ctx, ns), sn)
			if err != nil {
				return nil, fmt.Errorf("listing snapshotter %s: %w", sn, err)
			}
			if held {
				out = append(out, sn)
				break
			}
		}
	}
	return out, nil
}

// unheld are what nothing holds now, by namespace and name.
func (r reclaimer) unheld(ctx context.Context) (map[string]bool, error) {
	records, err := r.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, u := range containerdrecords.NewGraph(records).Unheld() {
		out[u.Namespace+"/"+u.ID] = true
	}
	return out, nil
}
