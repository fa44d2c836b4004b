package schedule

import (
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/config"
)

func TestNextRun(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	interval := config.Scheduling{RepeatInterval: 24 * time.Hour, BeginImmediately: true}
	cases := map[string]struct {
		sched config.Scheduling
		state State
		want  time.Time
	}{
		"first run at once":       {sched: interval, want: start},
		"first run after a day":   {sched: config.Scheduling{RepeatInterval: 24 * time.Hour}, want: start.Add(24 * time.Hour)},
		"measured from the end":   {sched: interval, state: State{LastStart: start.Add(-30 * time.Hour), LastEnd: start.Add(-29 * time.Hour)}, want: start.Add(-5 * time.Hour)},
		"restart keeps rhythm":    {sched: interval, state: State{LastStart: start.Add(-2 * time.Hour), LastEnd: start.Add(-time.Hour)}, want: start.Add(23 * time.Hour)},
		"lost end: from start":    {sched: interval, state: State{LastStart: start.Add(-2 * time.Hour)}, want: start.Add(22 * time.Hour)},
		"cron at 03:00":           {sched: config.Scheduling{Cron: "0 3 * * *"}, want: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		"cron first at once":      {sched: config.Scheduling{Cron: "0 3 * * *", BeginImmediately: true}, want: start},
		"cron skips missed slots": {sched: config.Scheduling{Cron: "0 * * * *"}, state: State{LastStart: start.Add(-5 * time.Hour), LastEnd: start.Add(30 * time.Minute)}, want: start.Add(time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NextRun(tc.sched, tc.state, start); !got.Equal(tc.want) {
				t.Errorf("NextRun = %v, want %v", got, tc.want)
			}
		})
	}
}
