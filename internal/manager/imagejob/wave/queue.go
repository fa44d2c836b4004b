// The pure part of the node queue: in which order runs wait for a node,
// and how many pods the bound on pods in flight leaves room for.

package wave

import (
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// runRank orders the runs that wait for one node.
type Rank struct {
	// Scheduled runs (the collector's, hours of scanning) go after
	// ImageLists: a list that names a vulnerable image must not wait
	// behind them on a node both want.
	Scheduled bool
	Created   time.Time
	Name      string
}

// Before is whether a goes first.
func (a Rank) Before(b Rank) bool {
	if a.Scheduled != b.Scheduled {
		return !a.Scheduled
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

// RankOf is the job's place among the runs waiting for a node.
func RankOf(job *eraserv1.ImageJob, kind podspec.Kind) Rank {
	return Rank{Scheduled: kind == podspec.KindCollector, Created: job.CreationTimestamp.Time, Name: job.Name}
}

// HolderFunc answers, for a node of this job, the run it must wait for:
// another run's worker on it, or a run queued for it first. Empty is free.
type HolderFunc func(node string) string

// Room is how many pods a pass may create under the bound, and whether
// there is a bound at all.
func Room(bound, inFlight int) (int, bool) {
	if bound <= 0 {
		return 0, false
	}
	return max(bound-inFlight, 0), true
}
