package imagelist

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// A list deleted and created again under the same name is another list: its
// runs never take the first one's job names.
func TestJobNameFoldsInTheUID(t *testing.T) {
	list := func(uid string) *eraserv1.ImageList {
		l := builder.MakeImageList("gitops").Generation(1).Obj()
		l.UID = types.UID(uid)
		return l
	}
	names := map[string]string{
		"first list":             JobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
		"re-created list":        JobName(list("0f0f0f0f-0000-4000-8000-000000000002")),
		"first list, run-now":    RunNowJobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
		"re-created, run-now":    RunNowJobName(list("0f0f0f0f-0000-4000-8000-000000000002")),
		"first list, read again": JobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
	}
	if names["first list"] != names["first list, read again"] {
		t.Errorf("one list, two job names: %s, %s", names["first list"], names["first list, read again"])
	}
	delete(names, "first list, read again")
	seen := map[string]string{}
	for what, n := range names {
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share the job name %s", what, other, n)
		}
		seen[n] = what
	}
}

func reconcileOnce(t *testing.T, r *Reconciler, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readyOf(t *testing.T, name string) (*eraserv1.ImageList, *metav1.Condition) {
	t.Helper()
	list := &eraserv1.ImageList{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, list); err != nil {
		t.Fatal(err)
	}
	return list, meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady)
}

// Deleting a running job stops its run: the list does not start it again
// (it says why, once) until its spec changes.
func TestDeletedRunStaysStopped(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	list := builder.MakeImageList("stopped").Images("alpine").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "stopped")
	jobs := jobsOf(t, "stopped")
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}
	jobs[0].Status.Phase = eraserv1.PhaseRunning
	if err := env.Client.Status().Update(ctx, &jobs[0]); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "stopped")
	if l, _ := readyOf(t, "stopped"); l.Status.StartedGeneration != 1 {
		t.Fatalf("startedGeneration %d while generation 1 runs", l.Status.StartedGeneration)
	}

	if err := env.Client.Delete(ctx, &jobs[0]); err != nil {
		t.Fatal(err)
	}
	for range 2 { // level-based: a second pass changes nothing
		reconcileOnce(t, r, "stopped")
	}
	if n := len(jobsOf(t, "stopped")); n != 0 {
		t.Fatalf("%d jobs after the running one was deleted: the run started again", n)
	}
	if _, c := readyOf(t, "stopped"); c == nil || c.Reason != eraserv1.ReasonRunDeleted || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready after the deletion: %+v", c)
	}

	l, _ := readyOf(t, "stopped")
	l.Spec.Images = []string{"nginx"}
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "stopped")
	if jobs := jobsOf(t, "stopped"); len(jobs) != 1 || generationOf(&jobs[0]) != 2 {
		t.Fatalf("after an edit, jobs %v: want one job of generation 2", jobs)
	}
}

// A job or data ConfigMap of the run's name that another owner controls is
// never adopted: the run waits (JobConflict) until it is gone, then starts.
func TestLeftoverOfAnotherRunIsAConflict(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	list := builder.MakeImageList("leftover").Images("alpine").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	// The data of an earlier job of the same name, which the garbage
	// collector has not deleted yet.
	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: JobName(list),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob",
			Name: JobName(list), UID: "0f0f0f0f-0000-4000-8000-00000000dead", Controller: ptr.To(true)}}},
		Data: map[string]string{"stale": "true"}}
	if err := env.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if res := reconcileOnce(t, r, "leftover"); res.RequeueAfter != conflictRetry {
		t.Errorf("requeue %v while a leftover blocks the run, want %v", res.RequeueAfter, conflictRetry)
	}
	if _, c := readyOf(t, "leftover"); c == nil || c.Reason != eraserv1.ReasonJobConflict {
		t.Errorf("Ready while a leftover blocks the run: %+v", c)
	}
	// No job is created that could not get its data.
	if jobs := jobsOf(t, "leftover"); len(jobs) != 0 {
		t.Fatalf("%d jobs created while the leftover data is there", len(jobs))
	}
	// Nor would one read it as its own.
	if _, err := jobdata.Get(ctx, env.Client, ns, builder.MakeImageJob(JobName(list)).Obj()); !errors.Is(err, jobdata.ErrConflict) {
		t.Fatalf("the leftover read as another job's data: %v", err)
	}

	if err := env.Client.Delete(ctx, stale); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "leftover")
	jobs := jobsOf(t, "leftover")
	if len(jobs) != 1 {
		t.Fatalf("%d jobs once the leftover is gone", len(jobs))
	}
	data, err := jobdata.Get(ctx, env.Client, ns, &jobs[0])
	if err != nil || len(data.Images) != 1 || data.Images[0] != "alpine" {
		t.Fatalf("data once the leftover is gone: %+v, %v", data, err)
	}

	// A job of the name that another list controls is not adopted either.
	other := builder.MakeImageList("leftover-2").Images("nginx").Obj()
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	foreign := builder.MakeImageJob(JobName(other)).Label(eraserv1.LabelImageList, "leftover-2").
		Annotation(eraserv1.AnnotationGeneration, "1").ControlledBy("leftover-2", "0f0f0f0f-0000-4000-8000-00000000beef").Obj()
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, "leftover-2")
	if _, c := readyOf(t, "leftover-2"); c == nil || c.Reason != eraserv1.ReasonJobConflict {
		t.Errorf("Ready while another list's job has the name: %+v", c)
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
