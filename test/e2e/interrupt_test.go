//go:build linux

package e2e

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testcri"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// interruption is one way a run of CRI RemoveImage calls is cut short.
type interruption struct {
	name string
	// kill: the runtime is killed (SIGKILL) this long after the calls are
	// issued, as the field's runtimes were (containerd/containerd#13875).
	kill time.Duration
	// cancel: call i's context is cancelled this long after it is issued,
	// as a caller giving up on its calls does; the runtime is killed and
	// restarted once every call has returned.
	cancel func(i int) time.Duration
}

var interruptions = []interruption{
	{name: "kill after 5ms", kill: 5 * time.Millisecond},
	{name: "kill after 20ms", kill: 20 * time.Millisecond},
	{name: "kill after 50ms", kill: 50 * time.Millisecond},
	{name: "kill after 150ms", kill: 150 * time.Millisecond},
	{name: "cancel each after 1-8ms", cancel: func(i int) time.Duration { return time.Duration(1+i%8) * time.Millisecond }},
}

const (
	// interruptRemoved is how many images the calls remove at once.
	interruptRemoved = 64
	// interruptDiskMiB is each store's tmpfs: the images take under 100
	// MiB with containerd's two copies.
	interruptDiskMiB = 256
)

// interruptNode is a runtime a test kills and restarts.
type interruptNode struct {
	*testcri.CRI
	root    string
	load    func(testing.TB, ...testimage.Image)
	kill    func(testing.TB)
	restart func(testing.TB)
	// store names the image store to "list --leftovers" and the remover
	// (CRI-O's).
	store []string
	// reclaimArgs are the remover's where it reclaims: CRI-O's run root.
	reclaimArgs []string
	// records are the runtime's image records (every namespace's on
	// containerd; the store's images, layers and containers on CRI-O).
	records func(t *testing.T) []string
	// dead, where the store can be read without the runtime, are the
	// leftovers in it while the runtime is down: what the interruption
	// left before a restart cleaned any of it.
	dead func(t *testing.T) map[leftoverkind.Kind][]leftover.Leftover
	// logged are the runtime's log lines about its store, since its start.
	logged func() []string
	// unrecorded is what the image filesystem holds that the runtime's
	// records do not name (containerd: blobs and snapshots its metadata
	// no longer knows; CRI-O: layer directories), which no listing shows.
	unrecorded func(t *testing.T) (string, uint64)
}

type interruptRuntime struct {
	name  string
	start func(t *testing.T) *interruptNode
	// zeroAges list every leftover, however young; removerAges are the
	// ages the remover runs with, its own flags (containerd's lease age
	// is the remover's default: it reclaims old-lease with no less than
	// an hour, and removals through the CRI make no lease; CRI-O's record
	// age is zero).
	zeroAges, removerAges []string
	// reclaim are the kinds the remover's policy names.
	reclaim []leftoverkind.Kind
	// capabilities are what the remover's container holds where it
	// reclaims (the pod spec's), beside root.
	capabilities []string
}

var interruptRuntimes = []interruptRuntime{
	{
		name:     "containerd",
		reclaim:  []leftoverkind.Kind{leftoverkind.UnnamedImage, leftoverkind.OldLease, leftoverkind.Unreferenced},
		zeroAges: []string{"--lease-age=0s"},
		start: func(t *testing.T) *interruptNode {
			c := testcontainerd.Start(t, testcontainerd.WithSmallDisk(interruptDiskMiB))
			return &interruptNode{CRI: c.CRI, root: c.RootDir(), load: c.Import, kill: c.Kill, restart: c.Restart,
				records:    func(t *testing.T) []string { return containerdRecords(t, c.Socket) },
				unrecorded: func(t *testing.T) (string, uint64) { return containerdUnrecorded(t, c.Socket, c.RootDir()) }}
		},
	},
	{
		name:         "crio",
		reclaim:      []leftoverkind.Kind{leftoverkind.UnreferencedLayer, leftoverkind.IncompleteLayer, leftoverkind.OrphanContainer},
		capabilities: podpaths.CRIOReclaimCapabilities,
		zeroAges:     []string{"--record-age=0s"}, removerAges: []string{"--record-age=0s"},
		start: func(t *testing.T) *interruptNode {
			c := testcrio.Start(t, testcrio.WithSmallDisk(interruptDiskMiB))
			return &interruptNode{CRI: c.CRI, root: c.RootDir(), load: c.Import, kill: c.Kill, restart: c.Restart,
				store:       []string{"--image-store=" + c.RootDir()},
				reclaimArgs: []string{"--crio-run-root=" + filepath.Join(c.Dir, "run")},
				records:     func(t *testing.T) []string { return crioRecords(t, c.RootDir()) },
				dead: func(t *testing.T) map[leftoverkind.Kind][]leftover.Leftover {
					return crioStoreLeftovers(t, c.RootDir())
				},
				unrecorded: func(t *testing.T) (string, uint64) { return crioUnrecorded(t, c.RootDir()) },
				logged: func() []string {
					return logLines(filepath.Join(c.Dir, "crio.log"), "unclean shutdown", "incomplete", "repair", "wipe", "deleting")
				}}
		},
	},
}

// TestInterruptedRemovals interrupts a run of concurrent CRI RemoveImage
// calls as the field reports (containerd/containerd#13875: the runtime
// killed in the middle of them; or each call's context cancelled), at a
// few points, restarts the runtime and then:
//
//   - logs the leftovers "eraser node list --leftovers" finds, by kind:
//     which appear depends on timing, so none is required;
//   - a remover run with no reclaim policy touches nothing (the leftovers
//     and the image records are the same after it) and reports as found
//     what the listing found;
//   - a remover run reclaiming the runtime's kinds (containerd:
//     unnamed-image, old-lease, unreferenced; CRI-O: unreferenced-layer,
//     incomplete-layer, orphan-container), holding only the capabilities
//     its container holds, leaves none of them, and the image filesystem
//     ends within 5% of a clean store that held the same images and holds
//     those still named, with nothing left on disk that the runtime's
//     records do not name (on containerd, a kill between its collection's
//     metadata and its sweep of the stores leaves such files, which no
//     listing shows).
func TestInterruptedRemovals(t *testing.T) {
	removed, kept := interruptImages()
	for _, rt := range interruptRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			for _, p := range interruptions {
				t.Run(p.name, func(t *testing.T) { interruptOn(t, rt, p, removed, kept) })
			}
		})
	}
}

// interruptImages are the images the calls remove, each of its own 256 KiB
// to 1 MiB of random bytes, and two kept, as files (not RandomBytes) so
// that a clean store builds the very same images.
func interruptImages() (removed, kept []testimage.Image) {
	for i := range interruptRemoved {
		size := 256<<10 + mrand.IntN(768<<10+1)
		removed = append(removed, testimage.Image{Tags: []string{fmt.Sprintf("example.com/interrupt/removed%02d:1", i)},
			Files: map[string][]byte{"data.bin": randomBytes(size)}})
	}
	for i := range 2 {
		kept = append(kept, testimage.Image{Tags: []string{fmt.Sprintf("example.com/interrupt/kept%d:1", i)},
			Files: map[string][]byte{"data.bin": randomBytes(4 << 20)}})
	}
	return removed, kept
}

func interruptOn(t *testing.T, rt interruptRuntime, p interruption, removed, kept []testimage.Image) {
	n := rt.start(t)
	all := append(append([]testimage.Image{}, removed...), kept...)
	n.load(t, all...)
	ids := n.ImageIDs(t)
	byID := map[string]testimage.Image{}
	var targets []string
	for _, img := range all {
		id, ok := ids[img.Tags[0]]
		if !ok {
			t.Fatalf("%s is not on the node after its import: %v", img.Tags[0], ids)
		}
		byID[id] = img
		if strings.Contains(img.Tags[0], "/removed") {
			targets = append(targets, id)
		}
	}
	usedBefore := usedBytes(t, n.root)

	interrupt(t, n, p, targets)

	// 1. What the interruption left.
	lists := func(ages []string) []string { return append(append([]string{}, n.store...), ages...) }
	found := stableLeftovers(t, n.CRIEndpoint(), lists(rt.zeroAges)...)
	t.Logf("%s: %s", p.name, kindTotals(found))
	why := map[leftoverkind.Kind]bool{}
	for _, l := range flatten(found) {
		if !why[l.Kind] {
			why[l.Kind] = true
			t.Logf("  %s: %s", l.Kind, l.Why)
		}
		t.Logf("    %s %s: %s", l.Namespace, l.Name, human(l.Bytes))
	}
	named, unnamed := namedImages(t, n)
	var remain []testimage.Image
	gone, onlyID := 0, 0
	for _, id := range targets {
		switch {
		case named[id]:
			remain = append(remain, byID[id])
		case unnamed[id]:
			onlyID++
		default:
			gone++
		}
	}
	for _, img := range kept {
		id := ids[img.Tags[0]]
		if !named[id] {
			t.Errorf("%s, never asked to be removed, is not on the node", img.Tags[0])
		}
		remain = append(remain, img)
	}
	what, b := n.unrecorded(t)
	t.Logf("%s: on disk beyond the runtime's records: %s; %s in all", p.name, what, human(b))
	t.Logf("%s: of %d removals, %d completed, %d left the image named, %d left it listed without a name; image filesystem %s before the removals, %s now",
		p.name, len(targets), gone, len(remain)-len(kept), onlyID, human(usedBefore), human(usedBytes(t, n.root)))

	// 2. No policy: the remover reports what it finds, and touches nothing.
	atRemoverAges := found
	if !slices.Equal(rt.zeroAges, rt.removerAges) {
		atRemoverAges = leftoversOf(t, n.CRIEndpoint(), lists(rt.removerAges)...)
		t.Logf("at the remover's ages: %s", kindTotals(atRemoverAges))
	}
	records := n.records(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nothing := imageListFile(t, "example.com/none:1")
	removerArgs := append([]string{"--runtime-endpoint=" + n.CRIEndpoint(), "--imagelist=" + nothing}, n.store...)
	off := runWorker(t, ctx, "remover", append(append([]string{}, removerArgs...), rt.removerAges...)...)
	if off.Code != 0 || off.Summary.Counts["not on node"] != 1 || len(off.Summary.Counts) != 1 {
		t.Fatalf("remover without a policy: exit %d, counts %v\n%s", off.Code, off.Summary.Counts, off.Stderr)
	}
	t.Logf("remover without a policy: counts %v, leftovers %+v", off.Summary.Counts, off.Summary.Leftovers)
	want := &jsonLeftovers{Found: len(flatten(atRemoverAges)), FoundBytes: totalBytes(atRemoverAges)}
	if got := off.Summary.Leftovers; got == nil || got.Error != "" ||
		(jsonLeftovers{got.Found, got.FoundBytes, got.Reclaimed, got.ReclaimedBytes, got.Failed}) != *want {
		t.Errorf("remover without a policy reports leftovers %+v, want %+v (what list found)\n%s", got, want, off.Stderr)
	}
	if diff := cmp.Diff(keys(found), keys(stableLeftovers(t, n.CRIEndpoint(), lists(rt.zeroAges)...))); diff != "" {
		t.Errorf("leftovers changed under a remover without a policy (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(records, n.records(t)); diff != "" {
		t.Errorf("image records changed under a remover without a policy (-before +after):\n%s", diff)
	}

	// 3. The policy on, the remover holding what its container holds.
	if len(rt.reclaim) > 0 {
		reclaimed := map[leftoverkind.Kind]bool{}
		var names []string
		for _, k := range rt.reclaim {
			reclaimed[k] = true
			names = append(names, string(k))
		}
		var wantN int
		var wantBytes uint64
		for kind, ls := range found {
			if reclaimed[kind] {
				wantN += len(ls)
				for _, l := range ls {
					wantBytes += l.Bytes
				}
			}
		}
		args := append(append(append(append([]string{}, removerArgs...), rt.removerAges...), n.reclaimArgs...), "--reclaim="+strings.Join(names, ","))
		on := workertest.WorkerAs(t, ctx, rt.capabilities, filepath.Join(bin, "remover"), args...)
		if on.Code != 0 {
			t.Fatalf("remover reclaiming: exit %d\n%s", on.Code, on.Stderr)
		}
		got := on.Summary.Leftovers
		t.Logf("reclaimed: %+v (%d leftovers of %s expected)", got, wantN, human(wantBytes))
		if got == nil || got.Error != "" || got.Failed != 0 || got.Reclaimed != wantN || got.Found != len(flatten(found))-wantN {
			t.Errorf("remover reclaiming reports %+v, want %d reclaimed, %d found (their kinds not reclaimed), none failed\n%s",
				got, wantN, len(flatten(found))-wantN, on.Stderr)
		}
		after := stableLeftovers(t, n.CRIEndpoint(), lists(rt.zeroAges)...)
		for kind, ls := range after {
			if reclaimed[kind] {
				t.Errorf("after reclaiming, %d %s leftovers remain: %+v", len(ls), kind, ls)
			}
		}
		if named2, _ := namedImages(t, n); !cmp.Equal(named, named2) {
			t.Errorf("reclaiming changed the named images: %d before, %d after", len(named), len(named2))
		}
		compareWithClean(t, rt, n, all, remain, true, nil)
		return
	}
	compareWithClean(t, rt, n, all, remain, len(found) == 0, found)
}

// jsonLeftovers is workerresult.Leftovers without its error, comparable.
type jsonLeftovers struct {
	Found          int
	FoundBytes     uint64
	Reclaimed      int
	ReclaimedBytes uint64
	Failed         int
}

// interrupt issues a RemoveImage call for every target at once and cuts
// them short as p says, then restarts the runtime.
func interrupt(t *testing.T, n *interruptNode, p interruption, targets []string) {
	t.Helper()
	type outcome struct {
		err   error
		after time.Duration
	}
	outcomes := make([]outcome, len(targets))
	start := make(chan struct{})
	var wg sync.WaitGroup
	var t0 time.Time
	for i, id := range targets {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			<-start
			if p.cancel != nil {
				var cancelCall context.CancelFunc
				ctx, cancelCall = context.WithCancel(ctx)
				defer cancelCall()
				defer time.AfterFunc(p.cancel(i), cancelCall).Stop()
			}
			_, err := n.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
			outcomes[i] = outcome{err, time.Since(t0)}
		})
	}
	t0 = time.Now()
	close(start)
	var killedAt time.Duration
	if p.kill > 0 {
		time.Sleep(p.kill)
		killedAt = time.Since(t0)
		n.kill(t)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("RemoveImage calls still running 3 minutes after they were issued")
	}
	if p.kill == 0 {
		killedAt = time.Since(t0)
		n.kill(t)
	}
	byResult := map[string]int{}
	var lastOK time.Duration
	for _, o := range outcomes {
		byResult[status.Code(o.err).String()]++
		if o.err == nil {
			lastOK = max(lastOK, o.after)
		}
	}
	t.Logf("%s: %d RemoveImage calls: %v; last success %v after the issue; killed after %v", p.name, len(targets), byResult, lastOK.Round(time.Millisecond), killedAt.Round(time.Millisecond))
	if n.dead != nil {
		t.Logf("%s: in the store before the restart: %s", p.name, kindTotals(n.dead(t)))
	}
	var before int
	if n.logged != nil {
		before = len(n.logged())
	}
	n.restart(t)
	if n.logged != nil {
		for _, l := range n.logged()[before:] {
			t.Logf("  restart: %s", l)
		}
	}
}

// compareWithClean compares the image filesystem's used bytes with a
// clean store's: the runtime started afresh, given all the images the node
// was, and the images that did not remain removed by uninterrupted CRI
// calls. Its history is the node's (a bolt database grows with the records
// it once held and does not shrink), and only the interruption is not.
// strict requires the two within 5%; otherwise the gap is logged beside
// the leftovers that explain it. A store given only the images that remain
// is logged too.
func compareWithClean(t *testing.T, rt interruptRuntime, n *interruptNode, all, remain []testimage.Image, strict bool, leftovers map[leftoverkind.Kind][]leftover.Leftover) {
	t.Helper()
	clean := rt.start(t)
	clean.load(t, all...)
	ids := clean.ImageIDs(t)
	kept := map[string]bool{}
	for _, img := range remain {
		kept[img.Tags[0]] = true
	}
	for _, img := range all {
		if kept[img.Tags[0]] {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := clean.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ids[img.Tags[0]]}})
		cancel()
		if err != nil {
			t.Fatalf("removing %s from the clean store: %v", img.Tags[0], err)
		}
	}
	dirty, want := usedBytes(t, n.root), usedBytes(t, clean.root)
	// What the runtime's records do not name no listing shows: containerd
	// leaves blobs and snapshots it has dropped from its metadata when
	// killed before it swept its stores. Reclaiming unreferenced leftovers
	// has it sweep them.
	what, unrecorded := n.unrecorded(t)
	t.Logf("on disk beyond the runtime's records now: %s; %s in all", what, human(unrecorded))
	if len(rt.reclaim) > 0 && unrecorded > 64<<10 {
		t.Errorf("after reclaiming, the image filesystem holds %s no record names: %s", human(unrecorded), what)
	}
	gap := float64(dirty) - float64(want)
	t.Logf("image filesystem: %s used (%d bytes); a clean store that held the same images and holds the %d still named: %s (%d bytes); gap %+.2f%%",
		human(dirty), dirty, len(remain), human(want), want, 100*gap/float64(want))
	fresh := rt.start(t)
	fresh.load(t, remain...)
	only := usedBytes(t, fresh.root)
	t.Logf("a store given only those images: %s (%d bytes), gap %+.2f%%: what the store's history adds (node %v, fresh %v)",
		human(only), only, 100*(float64(dirty)-float64(only))/float64(only), usageByDir(n.root, 1, 256<<10), usageByDir(fresh.root, 1, 256<<10))
	if !strict {
		t.Logf("leftovers explaining the gap: %s, %s in all", kindTotals(leftovers), human(totalBytes(leftovers)))
		return
	}
	if gap > 0.05*float64(want) || -gap > 0.05*float64(want) {
		t.Errorf("the image filesystem holds %d bytes, a clean store with the same images %d: more than 5%% apart\nnode:  %v\nclean: %v",
			dirty, want, usageByDir(n.root, 2, 64<<10), usageByDir(clean.root, 2, 64<<10))
	}
}
