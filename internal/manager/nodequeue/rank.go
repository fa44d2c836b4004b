package nodequeue

import "time"

// Rank orders the runs that wait for one node.
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

// HeldByFunc answers, for a node of a run, the run it must wait for:
// another run's worker on it, or a run queued for it first. Empty is free.
type HeldByFunc func(node string) string

// Headroom is how many pods a pass may create under the bound on pods in
// flight (0: none), and whether there is a bound at all.
func Headroom(bound, inFlight int) (int, bool) {
	if bound <= 0 {
		return 0, false
	}
	return max(bound-inFlight, 0), true
}
