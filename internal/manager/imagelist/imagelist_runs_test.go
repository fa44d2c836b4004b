package imagelist

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/reconcilestep"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

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

// A status write that loses to a newer version of the list (the job just
// created wakes the reconciler before the list's own update is in its
// cache) is retried soon, not returned: controller-runtime would log it as
// a reconciler error for every new ImageList. The retry finishes the work,
// and starts no second job.
func TestLostWriteIsRetriedQuietly(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	r.client = interceptor.NewClient(direct, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*eraserv1.ImageList); ok && lost == 0 {
				lost++
				return apierrors.NewConflict(eraserv1.GroupVersion.WithResource("imagelists").GroupResource(), obj.GetName(),
					errors.New("the object has been modified; please apply your changes to the latest version and try again"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	if err := env.Client.Create(ctx, builder.MakeImageList("lost-write").Images("alpine").Obj()); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "lost-write"}})
	if err != nil || res.RequeueAfter != reconcilestep.ConflictRetry || lost != 1 {
		t.Fatalf("a lost write: result %+v, error %v (conflicts returned %d); want a retry after %v and no error", res, err, lost, reconcilestep.ConflictRetry)
	}
	reconcileOnce(t, r, "lost-write")
	if l, _ := readyOf(t, "lost-write"); l.Status.StartedGeneration != 1 {
		t.Errorf("startedGeneration %d after the retry, want 1", l.Status.StartedGeneration)
	}
	if jobs := jobsOf(t, "lost-write"); len(jobs) != 1 {
		t.Errorf("%d jobs after the retry, want 1", len(jobs))
	}
}
