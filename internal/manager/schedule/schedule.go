package schedule

import (
	"fmt"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// State is what the schedule remembers between runs and manager restarts.
type State struct {
	// LastStart is when the last scheduled job was created.
	LastStart time.Time
	// LastEnd is when the last scheduled job finished.
	LastEnd time.Time
	// LastSuccess is when the last scheduled job (or catch-up) completed:
	// the scheduled-runs alert's metric, kept across manager restarts.
	LastSuccess time.Time
	// Coverage is what each node's workers last achieved.
	Coverage Coverage
	// ScheduledSince is when this manager first saw scheduled runs on (the
	// collector enabled), unset while they are off: before a first success
	// the scheduled-runs alert counts from it (alertFrom), so that an
	// install whose runs never complete is alerted on too.
	ScheduledSince time.Time
}

// alertFrom is the time the scheduled-runs alert's gauge holds: the last
// success, or before any, when scheduled runs were turned on; zero (no
// gauge) when neither is known.
func alertFrom(st State) time.Time {
	if !st.LastSuccess.IsZero() {
		return st.LastSuccess
	}
	return st.ScheduledSince
}

// scheduledSince decides the state's ScheduledSince at now: recorded once
// when the collector is on, kept while it stays on (across restarts: the
// state is a ConfigMap), dropped when it is turned off, so that turning it
// on later counts from then rather than from the install.
func scheduledSince(st State, collectorEnabled bool, now time.Time) time.Time {
	switch {
	case !collectorEnabled:
		return time.Time{}
	case st.ScheduledSince.IsZero():
		return now
	}
	return st.ScheduledSince
}

// NextRun is when the next scheduled job should start (schedtimes.Next).
func NextRun(s config.Scheduling, st State, managerStart time.Time) time.Time {
	return schedtimes.Next(s, st.times(), managerStart)
}

// times are the state's times of the last run.
func (st State) times() schedtimes.Times {
	return schedtimes.Times{LastStart: st.LastStart, LastEnd: st.LastEnd, LastSuccess: st.LastSuccess}
}

// decideRunNow judges a run-now request whose job would be named job, among
// the scheduled jobs there are; a refusal comes with its reason. A request
// whose job exists already stands, even if the collector has been disabled
// since: it only remains to be consumed.
func decideRunNow(collectorEnabled bool, job string, jobs []eraserv1.ImageJob) (runnow.Decision, string) {
	v := runnow.Decide(job, jobs)
	switch {
	case v.Action == runnow.Refuse:
		return v, fmt.Sprintf("scheduled ImageJob %s is running; set it again once it has finished", v.Job)
	case v.Action == runnow.Start && !collectorEnabled:
		return runnow.Decision{Action: runnow.Refuse}, "components.collector.enabled is false: there are no scheduled runs"
	}
	return v, ""
}
