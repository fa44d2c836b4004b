package wave

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestAddRegret(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ret := func(image string, back time.Duration) workerresult.RegretReturn {
		return workerresult.RegretReturn{Image: image, Repository: "r/" + image, Bytes: 10, Policy: "UnusedFor", Run: "j0", RemovedAt: t0, ReturnedAt: t0.Add(back)}
	}
	status := func(node, image string, back time.Duration) eraserv1.RegretReturn {
		return eraserv1.RegretReturn{Node: node, Image: image, Repository: "r/" + image, Bytes: 10, Policy: "UnusedFor", Run: "j0",
			RemovedAt: metav1.NewTime(t0), ReturnedAt: metav1.NewTime(t0.Add(back))}
	}
	node := func(name string, r *workerresult.Regret) *workerresult.Summary {
		return &workerresult.Summary{Component: "remover", Node: name, Regret: r}
	}
	cases := map[string]struct {
		summaries []*workerresult.Summary
		want      *eraserv1.RegretResults
	}{
		"none": {summaries: []*workerresult.Summary{node("a", nil), node("b", &workerresult.Regret{})}},
		"totals, policies in order, newest first across nodes": {
			summaries: []*workerresult.Summary{
				node("a", &workerresult.Regret{Returns: 3, BytesReturned: 30, ByPolicy: map[string]workerresult.RegretTotal{"DiskPressure": {Returns: 1, Bytes: 10}, "UnusedFor": {Returns: 1, Bytes: 10}, "Mystery": {Returns: 1, Bytes: 10}},
					Recent: []workerresult.RegretReturn{ret("x", 3*time.Hour), ret("y", time.Hour)}}),
				node("b", &workerresult.Regret{Returns: 4, BytesReturned: 40, ByPolicy: map[string]workerresult.RegretTotal{"Listed": {Returns: 4, Bytes: 40}},
					Recent: []workerresult.RegretReturn{ret("z", 2*time.Hour), ret("w", 2*time.Hour), ret("v", time.Minute), ret("u", time.Second)}}),
			},
			want: &eraserv1.RegretResults{Returns: 7, BytesReturned: 70,
				Policies: []eraserv1.PolicyRegret{{Policy: "Listed", Returns: 4, BytesReturned: 40}, {Policy: "UnusedFor", Returns: 1, BytesReturned: 10}, {Policy: "DiskPressure", Returns: 1, BytesReturned: 10}},
				Recent:   []eraserv1.RegretReturn{status("a", "x", 3*time.Hour), status("b", "w", 2*time.Hour), status("b", "z", 2*time.Hour), status("a", "y", time.Hour), status("b", "v", time.Minute)}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var total eraserv1.ImageResults
			for _, s := range c.summaries {
				AddResults(&total, s)
			}
			if diff := cmp.Diff(c.want, total.Regret); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegretCounts(t *testing.T) {
	cases := map[string]struct {
		regret *workerresult.Regret
		want   map[string]metrics.RegretCount
	}{
		"none": {},
		"by policy, the rest unknown": {
			regret: &workerresult.Regret{Returns: 3, BytesReturned: 35, ByPolicy: map[string]workerresult.RegretTotal{"UnusedFor": {Returns: 2, Bytes: 30}}},
			want:   map[string]metrics.RegretCount{"UnusedFor": {Returns: 2, Bytes: 30}, RegretUnknownPolicy: {Returns: 1, Bytes: 5}},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := Outcome{Summary: &workerresult.Summary{Regret: c.regret}}.counts().Regret
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
