//go:build linux && (!cgo || exclude_graphdriver_btrfs)

package reclaim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.podman.io/storage"
	storagetypes "go.podman.io/storage/types"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// stores keeps each opened store for the life of the process. A store is
// never shut down: Shutdown unmounts the driver's home, which on a node is
// CRI-O's mount, under its running containers.
var stores = struct {
	sync.Mutex
	open map[string]storage.Store
}{open: map[string]storage.Store{}}

// openStore opens CRI-O's containers/storage store for writing, as CRI-O
// does, with the driver options the node's configuration gives it, but
// without mounting anything: skip_mount_home keeps the overlay driver from
// making its home a private mount, which needs CAP_SYS_ADMIN and is
// CRI-O's to do. Every change then goes through containers/storage itself,
// under the locks CRI-O takes, and its record of each change tells CRI-O
// to re-read the records before its next use of them.
func openStore(s CRIOStore, driverOptions []string) (storage.Store, error) {
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
	var opts []string
	for _, o := range driverOptions {
		if !strings.HasPrefix(o, "overlay.skip_mount_home=") {
			opts = append(opts, o)
		}
	}
	st, err := storage.GetStore(storagetypes.StoreOptions{
		GraphRoot:          s.GraphRoot,
		RunRoot:            s.RunRoot,
		GraphDriverName:    s.Driver,
		GraphDriverOptions: append(opts, "overlay.skip_mount_home=true"),
	})
	if err != nil {
		return nil, fmt.Errorf("opening CRI-O's store %s: %w", s.GraphRoot, err)
	}
	stores.open[key] = st
	return st, nil
}

// knownKeys are the JSON keys of a record type of this build's
// containers/storage: what it writes back.
func knownKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
		case "":
			out[f.Name] = true
		default:
			out[name] = true
		}
	}
	return out
}

// recordsFiles are the store's records files containers/storage writes
// back whole on a change, with the keys this build keeps.
func recordsFiles(s CRIOStore) []recordsFile {
	layer, image, ctr := knownKeys(reflect.TypeFor[storage.Layer]()), knownKeys(reflect.TypeFor[storage.Image]()), knownKeys(reflect.TypeFor[storage.Container]())
	d := s.Driver
	return []recordsFile{
		{filepath.Join(s.GraphRoot, d+"-layers", "layers.json"), layer},
		{filepath.Join(s.GraphRoot, d+"-layers", "volatile-layers.json"), layer},
		{filepath.Join(s.GraphRoot, d+"-images", "images.json"), image},
		{filepath.Join(s.GraphRoot, d+"-containers", "containers.json"), ctr},
		{filepath.Join(s.GraphRoot, d+"-containers", "volatile-containers.json"), ctr},
	}
}

// checkRunRoot: the run root holds what CRI-O's store keeps there (the
// layers' mount records' directory), so that opening the store writes
// nothing where CRI-O does not run.
func checkRunRoot(s CRIOStore) error {
	dir := filepath.Join(s.RunRoot, s.Driver+"-layers")
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return fmt.Errorf("%s is not CRI-O's run root: it has no %s directory (crio.conf's runroot; manager.leftovers.crioRunRoot)", s.RunRoot, s.Driver+"-layers")
	}
	return nil
}

// preflight is what is known, before the store is opened for writing,
// that keeps it closed (refused, "" if not) or keeps the layers nothing
// holds (hold, "" if not), and the store's incomplete layers, which
// opening it deletes.
type preflight struct {
	refused, hold string
	options       []string
	incomplete    []string
	pullTemp      string
}

// check reads, from the files alone and before anything is written, the
// node's configuration of the store, its run root, its records and the
// pulls under way, in that order: the first reason to keep the store
// closed is the one reported.
func check(s CRIOStore, kinds map[leftoverkind.Kind]bool, now time.Time) (preflight, error) {
	var pf preflight
	n, err := readNodeStorage(s.HostRoot, s.StorageConf, s.CRIOConf)
	if err != nil {
		return pf, err
	}
	pf.options, pf.pullTemp = n.DriverOptions, n.PullTemp
	if pf.refused = refusal(n, s); pf.refused != "" {
		return pf, nil
	}
	if err := checkRunRoot(s); err != nil {
		return pf, err
	}
	if pf.refused, err = newerRecords(recordsFiles(s)); err != nil || pf.refused != "" {
		return pf, err
	}
	records, err := criorecords.Read(s.GraphRoot)
	if err != nil {
		return pf, err
	}
	for _, l := range records.Layers {
		if l.Incomplete {
			pf.incomplete = append(pf.incomplete, l.ID)
		}
	}
	if len(pf.incomplete) > 0 && !kinds[leftoverkind.IncompleteLayer] {
		pf.refused = fmt.Sprintf("not opened for writing: containers/storage would delete the store's %d incomplete layers on opening it, and the policy does not reclaim incomplete-layer (CRI-O deletes them itself at its next pull or restart)", len(pf.incomplete))
		return pf, nil
	}
	pf.hold = pulling(records, s, n.PullTemp, now, now)
	return pf, nil
}

// pulling says why a pull may be under way, or "": a pull's directory of
// blobs, or a layer written within the record age or since start.
func pulling(records criorecords.Records, s CRIOStore, pullTemp string, start, now time.Time) string {
	temps, err := readPullTemps(pullTemp)
	if err != nil {
		return "whether a pull is under way is not known: " + err.Error()
	}
	if why := pullUnderWay(temps, now); why != "" {
		return why
	}
	// A layer written since start is younger than now-start.
	return leftover.Pulling(records, max(s.RecordAge, now.Sub(start)), now)
}

// storeRecords are the store's layers and containers as containers/storage
// has them now.
func storeRecords(st storage.Store) (criorecords.Records, error) {
	layers, err := st.Layers()
	if err != nil {
		return criorecords.Records{}, err
	}
	containers, err := st.Containers()
	if err != nil {
		return criorecords.Records{}, err
	}
	var r criorecords.Records
	for _, l := range layers {
		r.Layers = append(r.Layers, criorecords.Layer{ID: l.ID, Parent: l.Parent, Created: l.Created})
	}
	for _, c := range containers {
		r.Containers = append(r.Containers, criorecords.Container{ID: c.ID, Layer: c.LayerID})
	}
	return r, nil
}

// reclaimCRIO deletes each leftover through containers/storage, the code
// CRI-O deletes with, after a re-check of it as things are right then: a
// container CRI-O lists again, a mounted layer are kept; the store itself
// refuses, under its locks, a layer an image, a container or another
// layer has taken up since it was found. No layer nothing holds is
// deleted while a pull may be under way, checked before each. The store
// is not written at all when the node configures it in a way this build
// does not honour, when its records hold fields this build would drop, or
// when opening it would delete incomplete layers the policy does not take.
func reclaimCRIO(ctx context.Context, s CRIOStore, kinds map[leftoverkind.Kind]bool, rt Runtime, take []leftover.Leftover, dryRun bool) []Result {
	out := make([]Result, 0, len(take))
	if dryRun {
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: WouldReclaim})
		}
		return out
	}
	start := time.Now()
	all := func(outcome Outcome, detail string) []Result {
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: outcome, Detail: detail})
		}
		return out
	}
	pf, err := check(s, kinds, start)
	switch {
	case err != nil:
		return all(Failed, err.Error())
	case pf.refused != "":
		return all(Failed, pf.refused)
	}
	st, err := openStore(s, pf.options)
	if err != nil {
		return all(Failed, err.Error())
	}
	// Opening the store deleted its incomplete layers, those found and
	// those too young to be judged: each is reported.
	taken := map[string]bool{}
	for _, l := range take {
		taken[crioID(l)] = true
	}
	for _, id := range pf.incomplete {
		if _, err := st.Layer(id); !taken[id] && gone(err) {
			out = append(out, Result{Leftover: leftover.Leftover{Kind: leftoverkind.IncompleteLayer, Name: id,
				Why: "flagged incomplete: a pull or a removal of it was cut short"},
				Outcome: Reclaimed, BytesUnknown: true,
				Detail: "deleted by containers/storage's clean-up of incomplete layers when the store was opened; not measured"})
		}
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
		if l.Kind == leftoverkind.OrphanContainer {
			return math.MaxInt
		}
		return depth[crioID(l)]
	}
	take = slices.Clone(take)
	slices.SortStableFunc(take, func(a, b leftover.Leftover) int { return cmp.Compare(order(b), order(a)) })
	for _, l := range take {
		switch l.Kind {
		case leftoverkind.OrphanContainer:
			out = append(out, reclaimContainer(ctx, st, rt, l))
		case leftoverkind.UnreferencedLayer:
			hold := pf.hold
			if hold == "" {
				records, err := storeRecords(st)
				if err != nil {
					out = append(out, Result{Leftover: l, Outcome: Failed, Detail: "re-check: " + err.Error()})
					continue
				}
				hold = pulling(records, s, pf.pullTemp, start, time.Now())
			}
			if hold != "" {
				out = append(out, Result{Leftover: l, Outcome: Kept, Detail: hold})
				continue
			}
			out = append(out, reclaimLayer(st, l))
		case leftoverkind.IncompleteLayer:
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
	case gone(err) && l.Kind == leftoverkind.IncompleteLayer:
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
