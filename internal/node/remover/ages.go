package remover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/nodestate"
)

// Where ages come from (report.Summary.AgeSource).
const (
	// AgeRuntime: the runtime's image records (containerd's images API,
	// CRI-O's image store).
	AgeRuntime = "runtime"
	// AgeFirstSeen: when Eraser first saw the image on the node.
	AgeFirstSeen = "first seen"
)

// imageTimer is a runtime that records when it pulled or re-tagged images:
// the newest time of each image record, by record name (cri.Client).
type imageTimer interface {
	ImageTimes(ctx context.Context) (map[string]time.Time, error)
}

// ImageTimes is the runtime's image record times, being read: the call
// waits for them. Nil times and a nil error mean the runtime keeps none.
type ImageTimes func() (map[string]time.Time, error)

// StartImageTimes starts reading the runtime's image record times, so that
// the listing overlaps the node's other listings instead of adding to them.
// A runtime without containerd's images API (CRI-O) has them in its image
// store instead: store is its root (--image-store), "" where none is
// mounted.
func StartImageTimes(ctx context.Context, rt any, store string) ImageTimes {
	timer, ok := rt.(imageTimer)
	if !ok && store == "" {
		return func() (map[string]time.Time, error) { return nil, nil }
	}
	type result struct {
		times map[string]time.Time
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		err := cri.ErrNoImageTimes
		var t map[string]time.Time
		if ok {
			t, err = timer.ImageTimes(ctx)
		}
		if errors.Is(err, cri.ErrNoImageTimes) && store != "" {
			t, err = criorecords.Times(store)
		}
		ch <- result{t, err}
	}()
	return func() (map[string]time.Time, error) {
		r := <-ch
		ch <- r
		if errors.Is(r.err, cri.ErrNoImageTimes) {
			return nil, nil
		}
		if r.err != nil {
			return nil, fmt.Errorf("reading when images were pulled: %w", r.err)
		}
		return r.times, nil
	}
}

// NodeAges records this reading of the node in its state (when stateDir is
// set) and returns each image's age and last use, where the ages came
// from, and the function that writes the state file (its fsync need not
// hold up the removals). An image's arrival is the newest time of the
// runtime's records for its ID, tags and digests; when the runtime keeps no
// records, or none for the image, it is when the state file first saw it
// (now, for an image new to the file).
//
// The state is loaded under the node's state lock (waiting up to lockWait;
// zero: nodestate.DefaultLockWait), this reading merged into it, and the
// lock released by save, which the caller must call: the lock covers one
// load, merge and save, so no other worker's update is lost and none waits
// for this one's removals.
func NodeAges(s *Snapshot, times ImageTimes, stateDir string, lockWait time.Duration, now time.Time) (ages []Age, source string, save func() error, err error) {
	// Read before the lock: the runtime's listing must not hold it.
	recorded, err := times()
	if err != nil {
		return nil, "", nil, err
	}
	state := nodestate.NewState()
	save = func() error { return nil }
	if stateDir != "" {
		locked, err := nodestate.LoadLocked(stateDir, lockWait)
		if err != nil {
			return nil, "", nil, err
		}
		state, save = locked.State, locked.Save
		// The removal ledger is read and written in the same critical
		// section, so that a return is counted once however many workers
		// read the node.
		if save, err = observeReturns(s, recorded, stateDir, now, locked); err != nil {
			_ = locked.Release()
			return nil, "", nil, err
		}
	}
	ids := make([]string, len(s.Images))
	for i, img := range s.Images {
		ids[i] = img.ID
	}
	state.Observe(now, ids, s.InUse)
	source = AgeFirstSeen
	if recorded != nil {
		source = AgeRuntime
	}
	ages = make([]Age, len(s.Images))
	for i, img := range s.Images {
		e := state.Get(img.ID)
		ages[i] = Age{Arrived: e.FirstSeen, LastUsed: e.LastUsed, FirstSeen: e.FirstSeen}
		if newest := newestRecord(recorded, img); !newest.IsZero() {
			ages[i].Arrived = newest
		}
		ages[i].Returns, ages[i].LastReturned = s.Returns(img.ID)
	}
	return ages, source, save, nil
}

// newestRecord is the newest time among the records named by the image's
// ID, tags and digests (zero when none is recorded).
func newestRecord(recorded map[string]time.Time, img cri.Image) time.Time {
	newest := recorded[img.ID]
	for _, names := range [][]string{img.Tags, img.Digests} {
		for _, name := range names {
			if t := recorded[name]; t.After(newest) {
				newest = t
			}
		}
	}
	return newest
}

// Reobserve merges this reading of the node into its state again, under
// the lock: the retry of a save the full disk refused, once the removals
// have freed room. Another worker's update since is kept, as any merge
// keeps it.
func Reobserve(s *Snapshot, stateDir string, lockWait time.Duration, now time.Time) error {
	if stateDir == "" {
		return nil
	}
	ids := make([]string, len(s.Images))
	for i, img := range s.Images {
		ids[i] = img.ID
	}
	l, err := nodestate.LoadLocked(stateDir, lockWait)
	if err != nil {
		return err
	}
	l.Observe(now, ids, s.InUse)
	// The ledger's save failed with the state's: what it learned is merged
	// again from this reading.
	save, err := observeReturns(s, nil, stateDir, now, l)
	if err != nil {
		_ = l.Release()
		return err
	}
	return save()
}
