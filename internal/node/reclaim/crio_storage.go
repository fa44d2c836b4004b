//go:build linux && (!cgo || exclude_graphdriver_btrfs)

package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"go.podman.io/storage"
	storagetypes "go.podman.io/storage/types"

	"github.com/eraser-oss/eraser/internal/node/leftover"
)

// stores keeps each opened store for the life of the process. A store is
// never shut down: Shutdown unmounts the driver's home, which on a node is
// CRI-O's mount, under its running containers.
var stores = struct {
	sync.Mutex
	open map[string]storage.Store
}{open: map[string]storage.Store{}}

// openStore opens CRI-O's containers/storage store for writing, as CRI-O
// does, but without mounting anything: skip_mount_home keeps the overlay
// driver from making its home a private mount, which needs CAP_SYS_ADMIN
// and is CRI-O's to do. Every change then goes through containers/storage
// itself, under the locks CRI-O takes, and its record of each change tells
// CRI-O to re-read the records before its next use of them.
func openStore(s CRIOStore) (storage.Store, error) {
	if s.Driver != "overlay" {
		return nil, fmt.Errorf("reclaiming on CRI-O is done with the overlay storage driver, not %q", s.Driver)
	}
	if s.GraphRoot == "" || s.RunRoot == "" {
		return nil, errors.New("reclaiming on CRI-O needs its image store and its run root")
	}
	stores.Lock()
	defer stores.Unlock()
	key := s.GraphRoot + "\x00" + s.RunRoot
	if st, ok := stores.open[key]; ok {
		return st, nil
	}
	st, err := storage.GetStore(storagetypes.StoreOptions{
		GraphRoot:          s.GraphRoot,
		RunRoot:            s.RunRoot,
		GraphDriverName:    s.Driver,
		GraphDriverOptions: []string{"overlay.skip_mount_home=true"},
	})
	if err != nil {
		return nil, fmt.Errorf("opening CRI-O's store %s: %w", s.GraphRoot, err)
	}
	stores.open[key] = st
	return st, nil
}

// reclaimCRIO deletes each leftover through containers/storage, the code
// CRI-O deletes with, after a re-check of it as things are right then: a
// container CRI-O lists again, a mounted layer are kept; the store itself
// refuses, under its locks, a layer an image, a container or another
// layer has taken up since it was found.
func reclaimCRIO(ctx context.Context, s CRIOStore, rt Runtime, take []leftover.Leftover, dryRun bool) []Result {
	out := make([]Result, 0, len(take))
	if dryRun {
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: WouldReclaim})
		}
		return out
	}
	st, err := openStore(s)
	if err != nil {
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: Failed, Detail: err.Error()})
		}
		return out
	}
	// A container's storage goes before the layers, and a layer before
	// the one under it, which containers/storage keeps while anything
	// stands on it.
	// Bounded: a parent chain the records loop in ends there.
	const maxDepth = 4096
	depth := map[string]int{}
	for _, l := range take {
		for id := crioID(l); id != "" && depth[crioID(l)] < maxDepth; depth[crioID(l)]++ {
			layer, err := st.Layer(id)
			if err != nil {
				break
			}
			id = layer.Parent
		}
	}
	order := func(l leftover.Leftover) int {
		if l.Kind == leftover.OrphanContainer {
			return math.MaxInt
		}
		return depth[crioID(l)]
	}
	take = slices.Clone(take)
	slices.SortStableFunc(take, func(a, b leftover.Leftover) int { return cmp.Compare(order(b), order(a)) })
	for _, l := range take {
		switch l.Kind {
		case leftover.OrphanContainer:
			out = append(out, reclaimContainer(ctx, st, rt, l))
		case leftover.UnreferencedLayer, leftover.IncompleteLayer:
			out = append(out, reclaimLayer(st, l))
		default:
			out = append(out, Result{Leftover: l, Outcome: Found, Detail: "not reclaimed on CRI-O"})
		}
	}
	return out
}

// crioID is the ID of a CRI-O leftover, whose name may carry the
// container's first name after it.
func crioID(l leftover.Leftover) string {
	id, _, _ := strings.Cut(l.Name, " ")
	return id
}

func reclaimContainer(ctx context.Context, st storage.Store, rt Runtime, l leftover.Leftover) Result {
	res := Result{Leftover: l}
	id := crioID(l)
	live, err := liveIDs(ctx, rt)
	if err != nil {
		res.Outcome, res.Detail = Failed, "re-check: listing CRI-O's containers: "+err.Error()
		return res
	}
	if live[id] {
		res.Outcome, res.Detail = Kept, "CRI-O lists it now"
		return res
	}
	c, err := st.Container(id)
	if errors.Is(err, storage.ErrContainerUnknown) {
		res.Outcome, res.Detail = Kept, "already gone"
		return res
	}
	if err != nil {
		res.Outcome, res.Detail = Failed, "re-check: "+err.Error()
		return res
	}
	if n, err := st.Mounted(c.LayerID); err == nil && n > 0 {
		res.Outcome, res.Detail = Kept, "its root filesystem is mounted: something uses it"
		return res
	}
	if err := st.DeleteContainer(id); err != nil {
		if errors.Is(err, storage.ErrContainerUnknown) {
			res.Outcome, res.Detail = Kept, "already gone"
			return res
		}
		res.Outcome, res.Detail = Failed, "deleting the container's storage: "+err.Error()
		return res
	}
	res.Outcome = Reclaimed
	return res
}

func reclaimLayer(st storage.Store, l leftover.Leftover) Result {
	res := Result{Leftover: l}
	id := crioID(l)
	if n, err := st.Mounted(id); err == nil && n > 0 {
		res.Outcome, res.Detail = Kept, "mounted: something uses it"
		return res
	}
	err := st.DeleteLayer(id)
	switch {
	case err == nil:
		res.Outcome = Reclaimed
	case gone(err) && l.Kind == leftover.IncompleteLayer:
		// Opening the layers for writing deletes every layer flagged
		// incomplete: containers/storage's own clean-up, which CRI-O's next
		// pull would have done too.
		res.Outcome, res.Detail = Reclaimed, "deleted by containers/storage's clean-up of incomplete layers"
	case gone(err):
		res.Outcome, res.Detail = Kept, "already gone"
	case errors.Is(err, storage.ErrLayerHasChildren), errors.Is(err, storage.ErrLayerUsedByImage), errors.Is(err, storage.ErrLayerUsedByContainer):
		res.Outcome, res.Detail = Kept, "taken up since it was found: "+err.Error()
	default:
		res.Outcome, res.Detail = Failed, "deleting the layer: "+err.Error()
	}
	return res
}

// gone: the store has no such layer.
func gone(err error) bool {
	return errors.Is(err, storage.ErrLayerUnknown) || errors.Is(err, storage.ErrNotALayer)
}
