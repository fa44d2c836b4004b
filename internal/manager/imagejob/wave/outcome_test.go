package wave

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// TestAddResults: each remover summary adds to the job's totals, the
// retention outcomes and the per-policy totals included, whatever order the
// nodes finish in.
func TestAddResults(t *testing.T) {
	retained := func(removedBy map[string]workerresult.PolicyTotal, counts map[string]int) *workerresult.Summary {
		return &workerresult.Summary{Component: "remover", Counts: counts, RemovedBy: removedBy}
	}
	cases := map[string]struct {
		total     eraserv1.ImageResults
		summaries []*workerresult.Summary
		want      eraserv1.ImageResults
	}{
		"no summary": {
			summaries: []*workerresult.Summary{nil},
		},
		"outcomes": {
			summaries: []*workerresult.Summary{
				retained(nil, map[string]int{"removed": 2, "in use": 1, "too young": 3, "recently used": 4, "not needed": 5, "refused": 1}),
				retained(nil, map[string]int{"too young": 1, "not needed": 1, "refused": 2, "failed": 1}),
			},
			want: eraserv1.ImageResults{Removed: 2, InUse: 1, TooYoung: 4, RecentlyUsed: 4, NotNeeded: 6, Refused: 3, Failed: 1},
		},
		"policies in the fixed order": {
			summaries: []*workerresult.Summary{
				retained(map[string]workerresult.PolicyTotal{"DiskPressure": {Images: 1, Bytes: 100}, "Unused": {Images: 2, Bytes: 20}}, nil),
				retained(map[string]workerresult.PolicyTotal{"UnusedFor": {Images: 3, Bytes: 30}, "Listed": {Images: 1, Bytes: 1}}, nil),
				retained(map[string]workerresult.PolicyTotal{"Vulnerable": {Images: 1, Bytes: 5}, "DiskPressure": {Images: 2, Bytes: 50}}, nil),
			},
			want: eraserv1.ImageResults{Policies: []eraserv1.PolicyResult{
				{Policy: eraserv1.PolicyListed, Removed: 1, BytesFreed: 1},
				{Policy: eraserv1.PolicyUnused, Removed: 2, BytesFreed: 20},
				{Policy: eraserv1.PolicyVulnerable, Removed: 1, BytesFreed: 5},
				{Policy: eraserv1.PolicyUnusedFor, Removed: 3, BytesFreed: 30},
				{Policy: eraserv1.PolicyDiskPressure, Removed: 3, BytesFreed: 150},
			}},
		},
		"unknown and empty policies left out": {
			summaries: []*workerresult.Summary{
				retained(map[string]workerresult.PolicyTotal{"Mystery": {Images: 9, Bytes: 9}, "unusedFor": {Images: 1}, "Vulnerable": {}}, nil),
			},
		},
		"onto earlier totals": {
			total: eraserv1.ImageResults{Removed: 1, TooYoung: 1, Policies: []eraserv1.PolicyResult{
				{Policy: eraserv1.PolicyUnused, Removed: 1, BytesFreed: 10},
				{Policy: eraserv1.PolicyDiskPressure, Removed: 1, BytesFreed: 10},
			}},
			summaries: []*workerresult.Summary{
				retained(map[string]workerresult.PolicyTotal{"UnusedFor": {Images: 1, Bytes: 7}, "Unused": {Images: 1, Bytes: 5}, "Listed": {Images: 2, Bytes: 2}},
					map[string]int{"removed": 4, "too young": 2}),
			},
			want: eraserv1.ImageResults{Removed: 5, TooYoung: 3, Policies: []eraserv1.PolicyResult{
				{Policy: eraserv1.PolicyListed, Removed: 2, BytesFreed: 2},
				{Policy: eraserv1.PolicyUnused, Removed: 2, BytesFreed: 15},
				{Policy: eraserv1.PolicyUnusedFor, Removed: 1, BytesFreed: 7},
				{Policy: eraserv1.PolicyDiskPressure, Removed: 1, BytesFreed: 10},
			}},
		},
		"dry run": {
			summaries: []*workerresult.Summary{{Component: "remover", DryRun: true, Counts: map[string]int{"removed": 1}, BytesFreed: 3,
				RemovedBy: map[string]workerresult.PolicyTotal{"UnusedFor": {Images: 1, Bytes: 3}}}},
			want: eraserv1.ImageResults{Removed: 1, BytesFreed: 3, DryRun: true,
				Policies: []eraserv1.PolicyResult{{Policy: eraserv1.PolicyUnusedFor, Removed: 1, BytesFreed: 3}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.total
			for _, s := range tc.summaries {
				AddResults(&got, s)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("totals (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCounts: what a node's pod reported becomes its metrics; a dry run
// removed and freed nothing.
func TestCounts(t *testing.T) {
	fs := &workerresult.ImageFs{CapacityBytes: 1000, UsedBeforeBytes: 900, UsedAfterBytes: 700}
	cases := map[string]struct {
		out  Outcome
		want metrics.NodeCounts
	}{
		"nothing": {},
		"removals by policy and the filesystem": {
			out: Outcome{Summary: &workerresult.Summary{Counts: map[string]int{"removed": 3}, ImageFs: fs,
				RemovedBy: map[string]workerresult.PolicyTotal{"DiskPressure": {Images: 2, Bytes: 200}, "UnusedFor": {Images: 1}, "Other": {Images: 1, Bytes: 1}}}},
			want: metrics.NodeCounts{Removed: 3, BytesFreed: map[string]int64{"DiskPressure": 200},
				ImageFs: &metrics.ImageFs{CapacityBytes: 1000, UsedBeforeBytes: 900, UsedAfterBytes: 700}},
		},
		"dry run": {
			out: Outcome{Summary: &workerresult.Summary{DryRun: true, Counts: map[string]int{"removed": 3}, ImageFs: fs,
				RemovedBy: map[string]workerresult.PolicyTotal{"DiskPressure": {Images: 2, Bytes: 200}}}},
			want: metrics.NodeCounts{ImageFs: &metrics.ImageFs{CapacityBytes: 1000, UsedBeforeBytes: 900, UsedAfterBytes: 900}},
		},
		"refused": {
			out:  Outcome{Summary: &workerresult.Summary{Counts: map[string]int{"removed": 1, "refused": 2}}},
			want: metrics.NodeCounts{Removed: 1, Refused: 2},
		},
		"scanner": {
			out:  Outcome{Scanner: &workerresult.Summary{Counts: map[string]int{workerresult.CountToRemove: 2}}},
			want: metrics.NodeCounts{Vulnerable: 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.out.counts()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if got.IsZero() != (name == "nothing") {
				t.Errorf("IsZero() = %v", got.IsZero())
			}
		})
	}
}
