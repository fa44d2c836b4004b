package plugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

func TestSpace(t *testing.T) {
	job := func(r *eraserv1.ImageResults) eraserv1.ImageJob {
		var j eraserv1.ImageJob
		j.Status.Results = r
		return j
	}
	rate := func(f float64) *float64 { return &f }
	cases := map[string]struct {
		jobs      []eraserv1.ImageJob
		want      *Space
		wantPrint string
	}{
		"no results": {jobs: []eraserv1.ImageJob{job(nil)}},
		"nothing came back": {
			jobs:      []eraserv1.ImageJob{job(&eraserv1.ImageResults{BytesFreed: 4 << 20})},
			want:      &Space{Jobs: 1, BytesFreed: 4 << 20, RegretRate: rate(0)},
			wantPrint: "Space (the 1 runs kept in the cluster): freed 4.0MiB; nothing came back after a removal\n",
		},
		"a quarter came back; a dry run's returns count, its bytes not": {
			jobs: []eraserv1.ImageJob{
				job(&eraserv1.ImageResults{BytesFreed: 8 << 20, Regret: &eraserv1.RegretResults{Returns: 1, BytesReturned: 1 << 20}}),
				job(&eraserv1.ImageResults{DryRun: true, BytesFreed: 100 << 20, Regret: &eraserv1.RegretResults{Returns: 2, BytesReturned: 1 << 20}}),
			},
			want:      &Space{Jobs: 2, BytesFreed: 8 << 20, BytesReturned: 2 << 20, Returns: 3, RegretRate: rate(0.25)},
			wantPrint: "Space (the 2 runs kept in the cluster): freed 8.0MiB; came back 2.0MiB (3 images): regret rate 25.0%\n",
		},
		"came back, nothing freed": {
			jobs:      []eraserv1.ImageJob{job(&eraserv1.ImageResults{Regret: &eraserv1.RegretResults{Returns: 1, BytesReturned: 1 << 20}})},
			want:      &Space{Jobs: 1, BytesReturned: 1 << 20, Returns: 1},
			wantPrint: "Space (the 1 runs kept in the cluster): freed 0B; came back 1.0MiB (1 images) of earlier runs' removals\n",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := space(c.jobs)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			var b strings.Builder
			printSpace(&b, got)
			if diff := cmp.Diff(c.wantPrint, b.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}
