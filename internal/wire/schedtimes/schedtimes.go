// Package schedtimes is the rhythm of scheduled runs as the schedule's
// state ConfigMap records it: the times of the last run, written by the
// manager and read by it and by `kubectl eraser status`, and when the next
// run is due.
package schedtimes

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

// StateName is the ConfigMap holding the schedule's state, in the
// manager's namespace.
const StateName = "eraser-schedule-state"

// Keys of the state's times, RFC 3339 in its data.
const (
	KeyLastStart = "lastStart"
	KeyLastEnd   = "lastEnd"
	// KeyLastSuccess is when a scheduled run last completed.
	KeyLastSuccess = "lastSuccess"
)

// Times are the last run's.
type Times struct {
	// LastStart is when the last scheduled job was created.
	LastStart time.Time
	// LastEnd is when the last scheduled job finished.
	LastEnd time.Time
	// LastSuccess is when the last scheduled job (or catch-up) completed.
	LastSuccess time.Time
}

// Read reads the times from the state's data; a missing or unreadable
// time is zero.
func Read(data map[string]string) Times {
	var t Times
	t.LastStart, _ = time.Parse(time.RFC3339, data[KeyLastStart])
	t.LastEnd, _ = time.Parse(time.RFC3339, data[KeyLastEnd])
	t.LastSuccess, _ = time.Parse(time.RFC3339, data[KeyLastSuccess])
	return t
}

// Write puts the times that are set into data.
func (t Times) Write(data map[string]string) {
	put := func(k string, v time.Time) {
		if !v.IsZero() {
			data[k] = v.UTC().Format(time.RFC3339)
		}
	}
	put(KeyLastStart, t.LastStart)
	put(KeyLastEnd, t.LastEnd)
	put(KeyLastSuccess, t.LastSuccess)
}

// Next is when the next scheduled job should start. managerStart stands in
// for the last end before anything has run: with beginImmediately the first
// run starts at once, otherwise one interval after the manager started.
//
// With a cron expression, runs start at its times; a time that passed while
// a run was going is skipped, not made up. Without one, repeatInterval is
// measured from the end of the last run, as upstream.
func Next(s config.Scheduling, t Times, managerStart time.Time) time.Time {
	if s.Cron != "" {
		sched, err := cron.ParseStandard(s.Cron)
		if err != nil {
			return time.Time{} // validated with the config; unreachable
		}
		from := managerStart
		if t.LastStart.After(from) {
			from = t.LastStart
		}
		if t.LastEnd.After(from) {
			from = t.LastEnd
		}
		if t.LastStart.IsZero() && s.BeginImmediately {
			return managerStart
		}
		return sched.Next(from)
	}
	if t.LastStart.After(t.LastEnd) {
		// The last run started and its end was never recorded: its job
		// was deleted while it ran (or lost). That ends its slot, and the
		// rhythm goes on from its start; measured from the end before it,
		// the slot would be due again at once, and recreated.
		return t.LastStart.Add(s.RepeatInterval)
	}
	if t.LastEnd.IsZero() {
		if s.BeginImmediately {
			return managerStart
		}
		return managerStart.Add(s.RepeatInterval)
	}
	return t.LastEnd.Add(s.RepeatInterval)
}
