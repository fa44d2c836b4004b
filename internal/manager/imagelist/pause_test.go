package imagelist

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestPauseHoldsRunNow on the real API server: paused, a run-now request on
// a list that has run is kept, not consumed, and the list says Paused;
// resumed, it runs.
func TestPauseHoldsRunNow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	const name = "paused-rerun"
	list := builder.MakeImageList(name).Images("alpine").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), list) })
	key := client.ObjectKey{Name: name}
	reconcileList := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	reconcileList()
	first := jobsOwnedBy(t, list)[0]
	finish(t, &first, eraserv1.PhaseCompleted)
	reconcileList()

	sw := pause.New(ns, "", "")
	if err := env.Client.Create(ctx, sw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sw) })
	if err := env.Client.Get(ctx, key, list); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(list.DeepCopy())
	list.Annotations = map[string]string{eraserv1.AnnotationRunNow: "true"}
	if err := env.Client.Patch(ctx, list, patch); err != nil {
		t.Fatal(err)
	}
	reconcileList()
	if n := len(jobsOwnedBy(t, list)); n != 1 {
		t.Fatalf("%d jobs while paused, want the first alone", n)
	}
	if err := env.Client.Get(ctx, key, list); err != nil {
		t.Fatal(err)
	}
	if !runnow.Requested(list) {
		t.Error("the run-now request was consumed while paused")
	}
	if c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Reason != eraserv1.ReasonPaused {
		t.Errorf("Ready while paused: %+v", c)
	}

	if err := env.Client.Delete(ctx, sw); err != nil {
		t.Fatal(err)
	}
	reconcileList()
	if n := len(jobsOwnedBy(t, list)); n != 2 {
		t.Fatalf("%d jobs after the resume, want the run-now's too", n)
	}
}
