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
		"no install date known": {
			list:    builder.MakeImageList("stale").Images("a").Created(before).Obj(),
			unknown: true,
			want:    Run,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := since
			if tc.unknown {
				s = time.Time{}
			}
			if diff := cmp.Diff(tc.want, Decide(tc.list, s)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
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
