package remover

import (
	"errors"
	"log/slog"
	"time"

	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/node/regret"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// observeReturns loads the node's removal ledger under the state lock that
// locked holds, counts the returns this reading of the node finds
// (Snapshot.Returned), keeps the ledger on the snapshot for Returns, and
// returns the save of both files: the ledger first, then the state, whose
// save releases the lock. recorded are the runtime's image record times,
// which date a return when they are after the removal.
func observeReturns(s *Snapshot, recorded map[string]time.Time, dir string, now time.Time, locked *nodestate.Locked) (func() error, error) {
	l, err := regret.Load(dir)
	if err != nil {
		return nil, err
	}
	present := make([]regret.Present, len(s.Images))
	for i, img := range s.Images {
		present[i] = regret.Present{ID: img.ID, Bytes: img.Size, Arrived: newestRecord(recorded, img)}
	}
	s.Returned = l.Observe(now, present)
	s.ledger = l
	return func() error {
		err := regret.Save(dir, l)
		return errors.Join(err, locked.Save())
	}, nil
}

// Returns is how many times the image came back after a removal, and when
// it last did, by the node's removal ledger as this reading left it: zero
// when the run keeps no state.
func (s *Snapshot) Returns(id string) (n int, last time.Time) {
	if s.ledger == nil {
		return 0, time.Time{}
	}
	return s.ledger.Returns(id)
}

// recordRemovals notes in the ledger the images the run removed (none on
// a dry run), after they settled, and takes the returns that no report told
// yet, for this run's: one load, merge and save under the node's state
// lock. at is when the removals were over.
func recordRemovals(snap *Snapshot, done []Result, opts Options, at time.Time) (*workerresult.Regret, error) {
	if opts.StateDir == "" {
		return nil, nil
	}
	var removals []regret.Removal
	if !opts.DryRun {
		index := map[string]int{}
		for i, img := range snap.Images {
			index[img.ID] = i
		}
		for _, r := range done {
			if r.Outcome != workerresult.Removed || !r.attempted {
				continue
			}
			rm := regret.Removal{ID: r.ImageID, Bytes: r.Bytes, Policy: string(r.Policy), Run: opts.Run}
			if i, ok := index[r.ImageID]; ok {
				rm.Repository = regret.Repository(snap.Images[i].Tags, snap.Images[i].Digests)
			}
			removals = append(removals, rm)
		}
	}
	lock, err := nodestate.AcquireLock(opts.StateDir, opts.StateLockWait)
	if err != nil {
		return nil, err
	}
	l, err := regret.Load(opts.StateDir)
	if err != nil {
		return nil, errors.Join(err, lock.Release())
	}
	l.Record(at, removals)
	told := l.TakeUnreported()
	if err := regret.Save(opts.StateDir, l); err != nil {
		// Not told: the next run tells them.
		return nil, errors.Join(err, lock.Release())
	}
	if snap.ledger != nil {
		snap.ledger = l
	}
	return RegretSummary(told), lock.Release()
}

// RegretSummary is the report of returns: totals, by policy, and the
// newest few (returns come newest first). Nil when there are none.
func RegretSummary(returns []regret.Return) *workerresult.Regret {
	if len(returns) == 0 {
		return nil
	}
	out := &workerresult.Regret{}
	for _, r := range returns {
		out.Returns++
		out.BytesReturned += r.Bytes
		if r.Policy != "" {
			if out.ByPolicy == nil {
				out.ByPolicy = map[string]workerresult.RegretTotal{}
			}
			t := out.ByPolicy[r.Policy]
			t.Returns++
			t.Bytes += r.Bytes
			out.ByPolicy[r.Policy] = t
		}
		if len(out.Recent) < workerresult.MaxRegretRecent {
			out.Recent = append(out.Recent, workerresult.RegretReturn{Image: r.ID, Repository: r.Repository, Bytes: r.Bytes, Policy: r.Policy,
				Run: r.Run, RemovedAt: r.RemovedAt, ReturnedAt: r.ReturnedAt})
		}
	}
	return out
}

// LogReturns logs each return a reading counted, for the node's log: the
// report tells the newest few.
func LogReturns(log *slog.Logger, returns []regret.Return) {
	for _, r := range returns {
		log.Info("an image removed earlier came back", "image", r.ID, "repository", r.Repository, "bytes", r.Bytes, "policy", r.Policy, "run", r.Run,
			"removedAt", r.RemovedAt, "returnedAt", r.ReturnedAt, "after", r.After().String())
	}
}
