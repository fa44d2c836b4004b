package jobdata

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// ErrConflict marks an object that has the name of this run's job, data or
// node list but belongs to another run: one deleted a moment ago whose
// dependents the garbage collector has not deleted yet, or a list deleted
// and created again under the same name. It is never used as this run's;
// the caller waits until it is gone.
var ErrConflict = errors.New("left over from another run")

// RunOf is the UID of obj's controller, the run it is of: "" for none (a
// scheduled job has no owner).
func RunOf(obj metav1.Object) types.UID {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID
	}
	return ""
}

// SameRun says whether obj, found under the name this run gives it, is this
// run's: controlled by owner (a job's data and pods by the job's UID; an
// ImageList's job by the list's UID; a scheduled job by nothing, since the
// slot in its name is its identity).
func SameRun(obj metav1.Object, owner types.UID) bool {
	return RunOf(obj) == owner
}

// conflict is the error for existing, which has the name this run wanted
// and another owner.
func conflict(kind string, existing metav1.Object, owner types.UID) error {
	found := RunOf(existing)
	if found == "" {
		found = "none"
	}
	if owner == "" {
		owner = "none"
	}
	return fmt.Errorf("%w: %s %s is controlled by %s, not by this run's %s; waiting for it to be deleted (the garbage collector deletes what a deleted owner leaves)",
		ErrConflict, kind, existing.GetName(), found, owner)
}

// getOwned reads job's ConfigMap name; one that another job owns is
// ErrConflict, never read as this job's.
func getOwned(ctx context.Context, c client.Reader, namespace, name string, job *eraserv1.ImageJob) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return nil, err
	}
	if !SameRun(cm, job.UID) {
		return nil, conflict("ConfigMap", cm, job.UID)
	}
	return cm, nil
}

// jobExists says whether a job of job's name exists; an error reading it
// counts as yes, so that the caller goes on to the create, which tells.
func jobExists(ctx context.Context, c client.Client, job *eraserv1.ImageJob) bool {
	err := c.Get(ctx, client.ObjectKeyFromObject(job), &eraserv1.ImageJob{})
	return !apierrors.IsNotFound(err)
}
