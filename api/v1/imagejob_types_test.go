package v1_test

import (
	"context"
	"fmt"
	"testing"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

func TestImageJobStatusValidation(t *testing.T) {
	testenv.Require(t)
	tooMany := builder.MakeImageJob("x").Phase(eraserv1.PhaseFailed)
	for i := range eraserv1.MaxReportedNodes + 1 {
		tooMany.FailedNode(fmt.Sprintf("node-%d", i), "PodFailed", "")
	}
	cases := map[string]struct {
		job     *eraserv1.ImageJob
		wantErr []string
	}{
		"running":               {job: builder.MakeImageJob("x").Phase(eraserv1.PhaseRunning).Counts(3, 0, 0, 1).Obj()},
		"bounded failures":      {job: builder.MakeImageJob("x").Phase(eraserv1.PhaseFailed).FailedNode("n1", "Timeout", "").Obj()},
		"unknown phase":         {job: builder.MakeImageJob("x").Phase("Exploded").Obj(), wantErr: []string{"status.phase", "Unsupported value"}},
		"too many failed nodes": {job: tooMany.Obj(), wantErr: []string{"status.failedNodes", "at most 32"}},
		"duplicate failed node": {job: builder.MakeImageJob("x").FailedNode("n1", "A", "").FailedNode("n1", "B", "").Obj(),
			wantErr: []string{"status.failedNodes[1]", "Duplicate value"}},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			job := tc.job.DeepCopy()
			job.Name = fmt.Sprintf("status-validation-%d", i)
			status := job.Status
			if err := env.Client.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, job) })
			job.Status = status
			checkErr(t, env.Client.Status().Update(ctx, job), tc.wantErr)
		})
	}
}
