package imagelist

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestNewerResults(t *testing.T) {
	at := func(sec int64) *metav1.Time { ts := metav1.Unix(sec, 0); return &ts }
	job := func(gen string, done *metav1.Time) *eraserv1.ImageJob {
		j := builder.MakeImageJob("j").Phase(eraserv1.PhaseCompleted).Obj()
		j.Annotations = map[string]string{eraserv1.AnnotationGeneration: gen}
		j.Status.CompletionTime = done
		return j
	}
	cases := map[string]struct {
		status eraserv1.ImageListStatus
		job    *eraserv1.ImageJob
		want   bool
	}{
		"nothing recorded yet":                 {job: job("1", at(100)), want: true},
		"a later generation":                   {status: eraserv1.ImageListStatus{ObservedGeneration: 1, Timestamp: at(500)}, job: job("2", at(100)), want: true},
		"an earlier generation":                {status: eraserv1.ImageListStatus{ObservedGeneration: 2, Timestamp: at(100)}, job: job("1", at(500)), want: false},
		"a re-run finished later":              {status: eraserv1.ImageListStatus{ObservedGeneration: 2, Timestamp: at(100)}, job: job("2", at(200)), want: true},
		"a re-run finished in the same second": {status: eraserv1.ImageListStatus{ObservedGeneration: 2, Timestamp: at(100)}, job: job("2", at(100)), want: true},
		"an older run of the generation":       {status: eraserv1.ImageListStatus{ObservedGeneration: 2, Timestamp: at(200)}, job: job("2", at(100)), want: false},
		"no completion time":                   {status: eraserv1.ImageListStatus{ObservedGeneration: 2, Timestamp: at(200)}, job: job("2", nil), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := newerResults(&tc.status, tc.job); got != tc.want {
				t.Errorf("newerResults = %v, want %v", got, tc.want)
			}
		})
	}
}

// The list's Ready condition after a run says how the run ended, the
// failure budget included.
func TestSetFinishedReason(t *testing.T) {
	ready := func(reason string) metav1.Condition {
		return metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "m"}
	}
	cases := map[string]struct {
		job  *eraserv1.ImageJob
		want string
	}{
		"completed": {job: builder.MakeImageJob("j").Phase(eraserv1.PhaseCompleted).Obj(), want: eraserv1.ReasonSucceeded},
		"failed":    {job: builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Condition(ready(eraserv1.ReasonFailed)).Obj(), want: eraserv1.ReasonFailed},
		"budget":    {job: builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Condition(ready(eraserv1.ReasonFailureBudgetExceeded)).Obj(), want: eraserv1.ReasonFailureBudgetExceeded},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			list := builder.MakeImageList("l").Obj()
			setFinished(list, tc.job)
			if c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Reason != tc.want {
				t.Errorf("Ready %+v, want reason %s", c, tc.want)
			}
		})
	}
}

// TestSetRunningQueued: a running job with nodes that wait for another
// run's worker shows on the list as Queued, behind that run; without
// waiting nodes, or for an older generation's job, as before.
func TestSetRunningQueued(t *testing.T) {
	gen := func(g string) *builder.ImageJobWrapper {
		return builder.MakeImageJob("j").Annotation(eraserv1.AnnotationGeneration, g).Phase(eraserv1.PhaseRunning).Counts(5, 0, 0, 1)
	}
	type result struct{ Reason, Behind string }
	cases := map[string]struct {
		job  *eraserv1.ImageJob
		want result
	}{
		"running":          {job: gen("1").Obj(), want: result{Reason: eraserv1.ReasonRunning}},
		"queued":           {job: gen("1").Waiting(3, "imagejob-scheduled-1").Obj(), want: result{Reason: eraserv1.ReasonQueued, Behind: "imagejob-scheduled-1"}},
		"older and queued": {job: gen("0").Waiting(3, "x").Obj(), want: result{Reason: eraserv1.ReasonPending}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		list := builder.MakeImageList("l").Obj()
		list.Generation = 1
		list.Status.QueuedBehind = "stale"
		setRunning(list, tc.job)
		c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady)
		got[name], want[name] = result{Reason: c.Reason, Behind: list.Status.QueuedBehind}, tc.want
		if name == "queued" && !strings.Contains(c.Message, "3 of 4 nodes wait") {
			t.Errorf("queued message %q does not count the waiting nodes", c.Message)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("setRunning (-want +got):\n%s", diff)
	}
}
