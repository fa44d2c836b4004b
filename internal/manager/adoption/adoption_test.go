package adoption

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestDecide(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	before, after := since.Add(-time.Hour), since.Add(time.Second)
	upstreamResult := metav1.NewTime(since.Add(-30 * time.Minute))
	tests := map[string]struct {
		list    *eraserv1.ImageList
		unknown bool // no install date
		fresh   bool // no earlier Eraser was found
		want    Decision
	}{
		"upstream's list, run by upstream": {
			list: builder.MakeImageList("imagelist").Images("a").Counts(3, 0, 0).Timestamp(upstreamResult).Created(before).Obj(),
			want: UpstreamRan,
		},
		"upstream's list, never run (upstream would have)": {
			list: builder.MakeImageList("imagelist").Images("a").Created(before).Obj(),
			want: Run,
		},
		"another name from before the install (upstream ignored it)": {
			list: builder.MakeImageList("stale").Images("a").Created(before).Obj(),
			want: NotRun,
		},
		"another name with results but no generation (only upstream writes those)": {
			list: builder.MakeImageList("stale").Images("a").Timestamp(upstreamResult).Created(before).Obj(),
			want: UpstreamRan,
		},
		"created after the install": {
			list: builder.MakeImageList("cleanup").Images("a").Created(after).Obj(),
			want: Run,
		},
		"created in the install's second": {
			list: builder.MakeImageList("cleanup").Images("a").Created(since).Obj(),
			want: Run,
		},
		"handled by this Eraser before (an edit)": {
			list: builder.MakeImageList("stale").Images("a").Generation(2).ObservedGeneration(1).Timestamp(upstreamResult).Created(before).Obj(),
			want: Run,
		},
		"adopted earlier and edited since": {
			list: builder.MakeImageList("stale").Images("a").Generation(2).Created(before).
				Condition(metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: eraserv1.ReasonNotRunOnAdoption}).Obj(),
			want: Run,
		},
		// A first install: a list from just before it came with it.
		"first install, another name from before the record": {
			list:  builder.MakeImageList("stale").Images("a").Created(before).Obj(),
			fresh: true,
			want:  Run,
		},
		"first install, upstream's name from before the record": {
			list:  builder.MakeImageList("imagelist").Images("a").Created(before).Obj(),
			fresh: true,
			want:  Run,
		},
		"first install, results without a generation": {
			list:  builder.MakeImageList("stale").Images("a").Timestamp(upstreamResult).Created(before).Obj(),
			fresh: true,
			want:  UpstreamRan,
		},
		"no install date known": {
			list:    builder.MakeImageList("stale").Images("a").Created(before).Obj(),
			unknown: true,
			want:    Run,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			inst := Install{Since: since, Earlier: !tc.fresh}
			if tc.unknown {
				inst = Install{}
			}
			if diff := cmp.Diff(tc.want, Decide(tc.list, inst)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvidence(t *testing.T) {
	recorded := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	lists := func(ls ...*eraserv1.ImageList) []eraserv1.ImageList {
		var out []eraserv1.ImageList
		for _, l := range ls {
			out = append(out, *l)
		}
		return out
	}
	applied := builder.MakeImageList("cleanup").Images("a").Created(recorded).Obj()
	ranUpstream := builder.MakeImageList("imagelist").Images("a").Counts(1, 0, 0).Timestamp(metav1.NewTime(recorded.Add(-time.Hour))).Obj()
	handled := builder.MakeImageList("old").Images("a").ObservedGeneration(1).Obj()
	job := eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{Name: "imagejob-x"}}
	tests := map[string]struct {
		crd   time.Time
		lists []eraserv1.ImageList
		jobs  []eraserv1.ImageJob
		want  string
	}{
		"first install, a list applied with it":   {crd: recorded.Add(time.Second), lists: lists(applied)},
		"first install, CRDs applied just before": {crd: recorded.Add(-10 * time.Second), lists: lists(applied)},
		"CRD unknown":                 {lists: lists(applied)},
		"an ImageJob":                 {crd: recorded, jobs: []eraserv1.ImageJob{job}, want: "ImageJob imagejob-x was there"},
		"upstream's results":          {crd: recorded, lists: lists(applied, ranUpstream), want: "ImageList imagelist had a status"},
		"an earlier install's status": {crd: recorded, lists: lists(handled), want: "ImageList old had a status"},
		"CRDs from long before": {crd: recorded.Add(-24 * time.Hour), lists: lists(applied),
			want: "the ImageList CRD was created at 2026-11-30T10:00:00Z, before the record"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Evidence(recorded, tc.crd, tc.lists, tc.jobs)); diff != "" {
				t.Errorf("Evidence (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessageSaysHowToRun(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	list := builder.MakeImageList("stale").Images("a").Obj()
	for _, v := range []Decision{UpstreamRan, NotRun} {
		msg := Message(v, list, since)
		for _, want := range []string{eraserv1.AnnotationRunNow, "kubectl eraser run imagelist/stale", "edited"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", v, msg, want)
			}
		}
	}
	if got := Message(NotRun, list, since); !strings.Contains(got, "2026-12-01T10:00:00Z") || !strings.Contains(got, `"imagelist"`) {
		t.Errorf("NotRun message %q: want the install's date and upstream's one name", got)
	}
	if got := Message(Run, list, since); got != "" {
		t.Errorf("Run has a message: %q", got)
	}
}
