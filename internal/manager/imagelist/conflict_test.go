package imagelist

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

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
	if err != nil || res.RequeueAfter != staleRetry || lost != 1 {
		t.Fatalf("a lost write: result %+v, error %v (conflicts returned %d); want a retry after %v and no error", res, err, lost, staleRetry)
	}
	reconcileOnce(t, r, "lost-write")
	if l, _ := readyOf(t, "lost-write"); l.Status.StartedGeneration != 1 {
		t.Errorf("startedGeneration %d after the retry, want 1", l.Status.StartedGeneration)
	}
	if jobs := jobsOf(t, "lost-write"); len(jobs) != 1 {
		t.Errorf("%d jobs after the retry, want 1", len(jobs))
	}
}
