package schedule

import (
	"github.com/google/go-cmp/cmp"
	"testing"

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
