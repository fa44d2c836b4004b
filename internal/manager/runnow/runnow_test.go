package runnow

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestDecide(t *testing.T) {
	const mine = "imagejob-list-abc123-g3-r0a1b2c3d"
	running := builder.MakeImageJob("imagejob-list-abc123-g3").Phase(eraserv1.PhaseRunning).Obj()
	created := builder.MakeImageJob("imagejob-list-abc123-g2").Obj() // no phase yet: just created
	done := builder.MakeImageJob("imagejob-list-abc123-g1").Phase(eraserv1.PhaseCompleted).Obj()
	failed := builder.MakeImageJob("imagejob-list-abc123-g1-rffff").Phase(eraserv1.PhaseFailed).Obj()
	cases := map[string]struct {
		jobs []eraserv1.ImageJob
		want Decision
	}{
		"no jobs":                        {want: Decision{Action: Start, Job: mine}},
		"only finished jobs":             {jobs: []eraserv1.ImageJob{*done, *failed}, want: Decision{Action: Start, Job: mine}},
		"a job running":                  {jobs: []eraserv1.ImageJob{*done, *running}, want: Decision{Action: Refuse, Job: running.Name}},
		"a job just created":             {jobs: []eraserv1.ImageJob{*created}, want: Decision{Action: Refuse, Job: created.Name}},
		"its own job running":            {jobs: []eraserv1.ImageJob{*builder.MakeImageJob(mine).Phase(eraserv1.PhaseRunning).Obj()}, want: Decision{Action: Started, Job: mine}},
		"its own job finished":           {jobs: []eraserv1.ImageJob{*builder.MakeImageJob(mine).Phase(eraserv1.PhaseCompleted).Obj()}, want: Decision{Action: Started, Job: mine}},
		"its own job beside another one": {jobs: []eraserv1.ImageJob{*running, *builder.MakeImageJob(mine).Obj()}, want: Decision{Action: Started, Job: mine}},
		"the first running job is named": {jobs: []eraserv1.ImageJob{*created, *running}, want: Decision{Action: Refuse, Job: created.Name}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(mine, tc.jobs)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	a := builder.MakeImageList("l").Obj()
	a.ResourceVersion = "41"
	b := a.DeepCopy()
	if RequestID(a) != RequestID(b) {
		t.Error("two reads of one request have two identities")
	}
	b.ResourceVersion = "42"
	if RequestID(a) == RequestID(b) {
		t.Error("a request made again has the identity of the first")
	}
	if Requested(builder.MakeImageList("l").Obj()) {
		t.Error("a list without the annotation is requested")
	}
	a.Annotations = map[string]string{eraserv1.AnnotationRunNow: ""}
	if !Requested(a) {
		t.Error("an empty value is not a request")
	}
}
