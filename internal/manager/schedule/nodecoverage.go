// Every node covered: the schedule records, per node, the last scheduled
// run its worker succeeded in; a node that missed the last run (NotReady
// then, joined during it, or failed) gets a catch-up run once it is
// eligible again and at least the minimum image age old, at most once per
// interval and batched with the others.

package schedule

import (
	"maps"
	"slices"
	"time"

	"github.com/robfig/cron/v3"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// Coverage is the per-node part of the schedule's state.
type Coverage struct {
	// Since is when the per-node record began (this version's first
	// recorded run): nodes are not judged against runs before it.
	Since time.Time
	// LastRun is the creation of the last scheduled run (not a catch-up)
	// that finished: a node whose last success is older missed it.
	LastRun time.Time
	// Cleaned is, per node, the creation of the last scheduled run or
	// catch-up its worker succeeded in.
	Cleaned map[string]time.Time
	// Tried is, per node, when its last catch-up run was created.
	Tried map[string]time.Time
}

// Known is whether any run has been recorded per node yet.
func (c Coverage) Known() bool { return !c.Since.IsZero() }

// EligibleNode is a node a scheduled run would run on now.
type EligibleNode struct {
	Name    string
	Created time.Time
}

// succeededNodes are the job's nodes whose worker succeeded: reached,
// neither failed nor waiting. targets is the job's node list. It is pure.
func succeededNodes(targets []string, st eraserv1.ImageJobStatus) []string {
	not := map[int]bool{}
	for _, ranges := range st.FailedIndexes {
		for _, i := range jobdata.ParseIndexes(ranges, len(targets)) {
			not[i] = true
		}
	}
	for _, i := range jobdata.ParseIndexes(st.WaitingIndexes, len(targets)) {
		not[i] = true
	}
	var out []string
	for i, name := range targets[:min(st.Started, len(targets))] {
		if !not[i] {
			out = append(out, name)
		}
	}
	return out
}

// record adds a finished run's successes. It is pure.
func (c Coverage) record(run time.Time, catchUp bool, succeeded []string, now time.Time) Coverage {
	out := Coverage{Since: c.Since, LastRun: c.LastRun, Cleaned: maps.Clone(c.Cleaned), Tried: maps.Clone(c.Tried)}
	if out.Cleaned == nil {
		out.Cleaned = map[string]time.Time{}
	}
	if out.Tried == nil {
		out.Tried = map[string]time.Time{}
	}
	if !out.Known() {
		out.Since = now
	}
	if !catchUp && run.After(out.LastRun) {
		out.LastRun = run
	}
	for _, n := range succeeded {
		if run.After(out.Cleaned[n]) {
			out.Cleaned[n] = run
		}
		// Covered for the last scheduled run, the node is done with
		// catch-ups: its record of them would only grow the state.
		if !out.Cleaned[n].Before(out.LastRun) {
			delete(out.Tried, n)
		}
	}
	return out
}

// due are the eligible nodes that missed the last scheduled run and had no
// catch-up within the interval, in name order. Nothing is due before the
// per-node record began. A node younger than minAge is not due yet: every
// image on it is younger, so a run would remove nothing the retention policy
// lets go; ripe is how long until the first such node is old enough (0: none
// waits). It is pure.
func due(c Coverage, eligible []EligibleNode, now time.Time, interval, minAge time.Duration) (nodes []string, ripe time.Duration) {
	if !c.Known() || c.LastRun.IsZero() {
		return nil, 0
	}
	for _, n := range eligible {
		if !c.Cleaned[n.Name].Before(c.LastRun) {
			continue
		}
		if t, ok := c.Tried[n.Name]; ok && now.Sub(t) < interval {
			continue
		}
		if left := minAge - now.Sub(n.Created); left > 0 {
			if ripe == 0 || left < ripe {
				ripe = left
			}
			continue
		}
		nodes = append(nodes, n.Name)
	}
	slices.Sort(nodes)
	return nodes, ripe
}

// interval is the time between two scheduled runs: repeatInterval, or with
// cron the gap from the last start to the next time after it. It is pure.
func interval(s config.Scheduling, lastStart time.Time) time.Duration {
	if s.Cron == "" {
		return s.RepeatInterval
	}
	sched, err := cron.ParseStandard(s.Cron)
	if err != nil {
		return 0 // validated with the config; unreachable
	}
	next := sched.Next(lastStart)
	return sched.Next(next).Sub(next)
}

// prune drops the nodes that no longer exist. It is pure.
func (c Coverage) prune(exists func(string) bool) Coverage {
	out := c
	out.Cleaned, out.Tried = map[string]time.Time{}, map[string]time.Time{}
	for n, t := range c.Cleaned {
		if exists(n) {
			out.Cleaned[n] = t
		}
	}
	for n, t := range c.Tried {
		if exists(n) {
			out.Tried[n] = t
		}
	}
	return out
}

// State ConfigMap keys of the coverage (state_encoding.go).
const (
	keySince   = "coverageSince"
	keyLastRun = "lastRun"
	// keyCleaned and keyTried are the JSON form: node names to unix seconds.
	keyCleaned = "cleaned"
	keyTried   = "catchUpTried"
)
