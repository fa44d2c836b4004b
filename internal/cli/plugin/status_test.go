package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestJobFor(t *testing.T) {
	list := builder.MakeImageJob("imagejob-cleanup-abc-g1").Labels(eraserv1.LabelJobOwner, eraserv1.JobOwnerImageList, eraserv1.LabelImageList, "cleanup").Obj()
	list.OwnerReferences = []metav1.OwnerReference{{Kind: "ImageList", Name: "cleanup-with-a-long-name"}}
	cases := map[string]struct {
		job  *eraserv1.ImageJob
		want string
	}{
		"a list's, by its owner": {job: list, want: "imagelist/cleanup-with-a-long-name"},
		"a scheduled run":        {job: builder.MakeImageJob("imagejob-scheduled-1").Labels(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Obj(), want: "schedule"},
		"a catch-up":             {job: builder.MakeImageJob("imagejob-scheduled-2").Labels(eraserv1.LabelJobOwner, eraserv1.JobOwnerCollector).Annotation(eraserv1.AnnotationCatchUp, "true").Obj(), want: "catch-up"},
		"a list's, label alone":  {job: builder.MakeImageJob("j").Labels(eraserv1.LabelJobOwner, eraserv1.JobOwnerImageList, eraserv1.LabelImageList, "x").Obj(), want: "imagelist/x"},
	}
	got, want := map[string]string{}, map[string]string{}
	for name, tc := range cases {
		got[name], want[name] = jobFor(tc.job), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobFor (-want +got):\n%s", diff)
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	last := now.Add(-time.Hour)
	next := now.Add(23 * time.Hour)
	s := Status{Namespace: "eraser-system", Now: now,
		Paused:   &Pause{Since: now.Add(-5 * time.Minute), By: "alice", Reason: "incident"},
		Lists:    []List{{Name: "cleanup", State: "Queued", LastRun: &last, Job: "imagejob-cleanup-g1", QueuedBehind: "imagejob-scheduled-1", RunNow: true}},
		Schedule: &Schedule{Enabled: true, Every: "24h0m0s", Scanner: true, LastEnd: &last, Next: &next, NextNote: "held by the pause"},
		Jobs:     []Job{{Name: "imagejob-scheduled-1", For: "schedule", Eligible: 10, Started: 6, Succeeded: 4, Failed: 1, Waiting: 2, State: "Paused"}},
	}
	var b strings.Builder
	PrintStatus(&b, s)
	for _, want := range []string{
		"PAUSED since 2026-12-04T11:55:00Z (5m0s ago) by alice (incident)",
		"Queued (run-now requested)",
		"imagejob-scheduled-1",
		"every 24h0m0s from the end of the last run (scanner on: only vulnerable images go)",
		"next run: 2026-12-05T11:00:00Z (held by the pause)",
		"5/10 (1 failed)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
}
