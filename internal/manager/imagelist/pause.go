package imagelist

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/pause"
)

// hold says, in the list's Ready condition, that the pause holds what
// would start now.
func (r *Reconciler) hold(ctx context.Context, list *eraserv1.ImageList, held pause.State, what string) error {
	before := list.Status.DeepCopy()
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: eraserv1.ReasonPaused,
		Message: held.Message(what), ObservedGeneration: list.Generation,
	})
	if equalStatus(before, &list.Status) {
		return nil
	}
	return r.client.Status().Update(ctx, list)
}

// allLists wakes every list, on a change of the pause switch.
func (r *Reconciler) allLists(ctx context.Context, _ client.Object) []reconcile.Request {
	var lists eraserv1.ImageListList
	if err := r.client.List(ctx, &lists); err != nil {
		log.FromContext(ctx).Error(err, "listing ImageLists to wake them on the pause switch")
		return nil
	}
	out := make([]reconcile.Request, 0, len(lists.Items))
	for _, l := range lists.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: l.Name}})
	}
	return out
}
