package schedtimes

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/config"
)

func TestNext(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	interval := config.Scheduling{RepeatInterval: 24 * time.Hour, BeginImmediately: true}
	cases := map[string]struct {
		sched config.Scheduling
		times Times
		want  time.Time
	}{
		"first run at once":     {sched: interval, want: start},
		"first run after a day": {sched: config.Scheduling{RepeatInterval: 24 * time.Hour}, want: start.Add(24 * time.Hour)},
		"measured from the end": {sched: interval, times: Times{LastStart: start.Add(-30 * time.Hour), LastEnd: start.Add(-29 * time.Hour)}, want: start.Add(-5 * time.Hour)},
		"restart keeps rhythm":  {sched: interval, times: Times{LastStart: start.Add(-2 * time.Hour), LastEnd: start.Add(-time.Hour)}, want: start.Add(23 * time.Hour)},
		"lost end: from start":  {sched: interval, times: Times{LastStart: start.Add(-2 * time.Hour)}, want: start.Add(22 * time.Hour)},
		// The running job was deleted: its slot is over, not due again.
		"deleted run: from its start": {sched: interval, times: Times{LastStart: start.Add(-2 * time.Hour), LastEnd: start.Add(-25 * time.Hour)}, want: start.Add(22 * time.Hour)},
		"cron at 03:00":               {sched: config.Scheduling{Cron: "0 3 * * *"}, want: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		"cron first at once":          {sched: config.Scheduling{Cron: "0 3 * * *", BeginImmediately: true}, want: start},
		"cron skips missed slots":     {sched: config.Scheduling{Cron: "0 * * * *"}, times: Times{LastStart: start.Add(-5 * time.Hour), LastEnd: start.Add(30 * time.Minute)}, want: start.Add(time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Next(tc.sched, tc.times, start); !got.Equal(tc.want) {
				t.Errorf("Next = %v, want %v", got, tc.want)
			}
		})
	}
}

// The times round-trip through the state's data, and what is unset stays
// out of it.
func TestReadWrite(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 10, 0, 0, time.UTC)
	in := Times{LastStart: at.Add(-10 * time.Minute), LastEnd: at}
	data := map[string]string{}
	in.Write(data)
	if diff := cmp.Diff(map[string]string{KeyLastStart: "2026-12-01T00:00:00Z", KeyLastEnd: "2026-12-01T00:10:00Z"}, data); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(in, Read(data)); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if got := Read(map[string]string{KeyLastEnd: "yesterday"}); !got.LastEnd.IsZero() {
		t.Errorf("an unreadable time read as %v", got.LastEnd)
	}
}
