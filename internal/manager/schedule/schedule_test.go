package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

func TestNextRun(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	interval := config.Scheduling{RepeatInterval: 24 * time.Hour, BeginImmediately: true}
	cases := map[string]struct {
		sched config.Scheduling
		state State
		want  time.Time
	}{
		"first run at once":     {sched: interval, want: start},
		"first run after a day": {sched: config.Scheduling{RepeatInterval: 24 * time.Hour}, want: start.Add(24 * time.Hour)},
		"measured from the end": {sched: interval, state: State{LastStart: start.Add(-30 * time.Hour), LastEnd: start.Add(-29 * time.Hour)}, want: start.Add(-5 * time.Hour)},
		"restart keeps rhythm":  {sched: interval, state: State{LastStart: start.Add(-2 * time.Hour), LastEnd: start.Add(-time.Hour)}, want: start.Add(23 * time.Hour)},
		"lost end: from start":  {sched: interval, state: State{LastStart: start.Add(-2 * time.Hour)}, want: start.Add(22 * time.Hour)},
		// The running job was deleted: its slot is over, not due again.
		"deleted run: from its start": {sched: interval, state: State{LastStart: start.Add(-2 * time.Hour), LastEnd: start.Add(-25 * time.Hour)}, want: start.Add(22 * time.Hour)},
		"cron at 03:00":               {sched: config.Scheduling{Cron: "0 3 * * *"}, want: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)},
		"cron first at once":          {sched: config.Scheduling{Cron: "0 3 * * *", BeginImmediately: true}, want: start},
		"cron skips missed slots":     {sched: config.Scheduling{Cron: "0 * * * *"}, state: State{LastStart: start.Add(-5 * time.Hour), LastEnd: start.Add(30 * time.Minute)}, want: start.Add(time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := NextRun(tc.sched, tc.state, start); !got.Equal(tc.want) {
				t.Errorf("NextRun = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecideRunNow(t *testing.T) {
	const mine = "imagejob-scheduled-now-0a1b2c3d"
	running := builder.MakeImageJob("imagejob-scheduled-1700000000").Phase(eraserv1.PhaseRunning).Obj()
	done := builder.MakeImageJob("imagejob-scheduled-1690000000").Phase(eraserv1.PhaseCompleted).Obj()
	own := builder.MakeImageJob(mine).Phase(eraserv1.PhaseRunning).Obj()
	type verdict struct {
		Action  runnow.Action
		Job     string
		Refusal string
	}
	cases := map[string]struct {
		enabled bool
		jobs    []eraserv1.ImageJob
		want    verdict
	}{
		"starts":                       {enabled: true, jobs: []eraserv1.ImageJob{*done}, want: verdict{Action: runnow.Start, Job: mine}},
		"refused while a run goes":     {enabled: true, jobs: []eraserv1.ImageJob{*done, *running}, want: verdict{Action: runnow.Refuse, Job: running.Name, Refusal: "scheduled ImageJob imagejob-scheduled-1700000000 is running; set it again once it has finished"}},
		"refused with no collector":    {want: verdict{Action: runnow.Refuse, Refusal: "components.collector.enabled is false: there are no scheduled runs"}},
		"running beats disabled":       {jobs: []eraserv1.ImageJob{*running}, want: verdict{Action: runnow.Refuse, Job: running.Name, Refusal: "scheduled ImageJob imagejob-scheduled-1700000000 is running; set it again once it has finished"}},
		"its job exists":               {enabled: true, jobs: []eraserv1.ImageJob{*own}, want: verdict{Action: runnow.Started, Job: mine}},
		"its job exists, now disabled": {jobs: []eraserv1.ImageJob{*own}, want: verdict{Action: runnow.Started, Job: mine}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, refusal := decideRunNow(tc.enabled, mine, tc.jobs)
			if diff := cmp.Diff(tc.want, verdict{Action: v.Action, Job: v.Job, Refusal: refusal}); diff != "" {
				t.Errorf("decideRunNow (-want +got):\n%s", diff)
			}
		})
	}
}
