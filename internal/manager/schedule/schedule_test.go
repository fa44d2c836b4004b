package schedule

import (
	"github.com/google/go-cmp/cmp"
	"testing"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

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

// TestAlertFrom: the scheduled-runs alert counts from the last success, or
// before any from when scheduled runs were turned on, which is recorded
// once, kept while they stay on and dropped when they are turned off.
func TestAlertFrom(t *testing.T) {
	t0 := time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)
	now := t0.Add(72 * time.Hour)
	type result struct{ Since, AlertFrom time.Time }
	cases := map[string]struct {
		st        State
		collector bool
		want      result
	}{
		"a new install with scheduled runs": {collector: true, want: result{now, now}},
		"a new install without":             {},
		"on since t0, never completed":      {st: State{ScheduledSince: t0}, collector: true, want: result{t0, t0}},
		"on since t0, completed since":      {st: State{ScheduledSince: t0, LastSuccess: t0.Add(time.Hour)}, collector: true, want: result{t0, t0.Add(time.Hour)}},
		"turned off before any completed":   {st: State{ScheduledSince: t0}},
		"turned off after a success":        {st: State{ScheduledSince: t0, LastSuccess: t0.Add(time.Hour)}, want: result{AlertFrom: t0.Add(time.Hour)}},
		"an older state with a success":     {st: State{LastSuccess: t0}, collector: true, want: result{now, t0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			st.ScheduledSince = scheduledSince(st, tc.collector, now)
			if diff := cmp.Diff(tc.want, result{st.ScheduledSince, alertFrom(st)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
