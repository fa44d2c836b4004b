package imagelist

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
)

// adopt takes over, without running it, a list that was there before the
// install where upstream Eraser would not run it now (package adoption). It
// reports whether it did.
func (r *Reconciler) adopt(ctx context.Context, list *eraserv1.ImageList) (bool, error) {
	inst, err := adoption.Read(ctx, r.client, r.namespace)
	if err != nil {
		return false, err
	}
	v := adoption.Decide(list, inst)
	if v == adoption.Run {
		return false, nil
	}
	msg := adoption.Message(v, list, inst.Since)
	list.Status.ObservedGeneration = list.Generation
	meta.SetStatusCondition(&list.Status.Conditions, metav1.Condition{
		Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: string(v), Message: msg,
		ObservedGeneration: list.Generation,
	})
	if err := r.client.Status().Update(ctx, list); err != nil {
		return false, err
	}
	r.recorder.Event(list, corev1.EventTypeNormal, string(v), msg)
	return true, nil
}
