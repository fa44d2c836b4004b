package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/wire/config"
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
}

// NextRun is when the next scheduled job should start. managerStart stands
// in for the last end before anything has run: with beginImmediately the
// first run starts at once, otherwise one interval after the manager started.
//
// With a cron expression, runs start at its times; a time that passed while
// a run was going is skipped, not made up. Without one, repeatInterval is
// measured from the end of the last run, as upstream.
func NextRun(s config.Scheduling, st State, managerStart time.Time) time.Time {
	if s.Cron != "" {
		sched, err := cron.ParseStandard(s.Cron)
		if err != nil {
			return time.Time{} // validated with the config; unreachable
		}
		from := managerStart
		if st.LastStart.After(from) {
			from = st.LastStart
		}
		if st.LastEnd.After(from) {
			from = st.LastEnd
		}
		if st.LastStart.IsZero() && s.BeginImmediately {
			return managerStart
		}
		return sched.Next(from)
	}
	if st.LastStart.After(st.LastEnd) {
		// The last run started and its end was never recorded: its job
		// was deleted while it ran (or lost). That ends its slot, and the
		// rhythm goes on from its start; measured from the end before it,
		// the slot would be due again at once, and recreated.
		return st.LastStart.Add(s.RepeatInterval)
	}
	if st.LastEnd.IsZero() {
		if s.BeginImmediately {
			return managerStart
		}
		return managerStart.Add(s.RepeatInterval)
	}
	return st.LastEnd.Add(s.RepeatInterval)
}

// decideRunNow judges a run-now request whose job would be named job, among
// the scheduled jobs there are; a refusal comes with its reason. A request
// whose job exists already stands, even if the collector has been disabled
// since: it only remains to be consumed.
func decideRunNow(collectorEnabled bool, job string, jobs []eraserv1.ImageJob) (runnow.Verdict, string) {
	v := runnow.Decide(job, jobs)
	switch {
	case v.Action == runnow.Refuse:
		return v, fmt.Sprintf("scheduled ImageJob %s is running; set it again once it has finished", v.Job)
	case v.Action == runnow.Start && !collectorEnabled:
		return runnow.Verdict{Action: runnow.Refuse}, "components.collector.enabled is false: there are no scheduled runs"
	}
	return v, ""
}
