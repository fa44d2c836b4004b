// Package reconcilestep is what the manager's reconcilers share about their
// steps: each step's error carries the step's name, so that the log says
// which failed, and a write that lost to a newer version of its object is
// passed again soon instead of failing.
package reconcilestep

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Wrap names a step's error; nil stays nil.
func Wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// ConflictRetry is how soon a pass whose write lost to a newer version runs
// again: by then the cache has caught up with a write in all but an
// overloaded API server.
const ConflictRetry = 500 * time.Millisecond

// RequeueOnConflict turns a conflict into a pass again after ConflictRetry.
// A write refused as a conflict means the cache's copy of the object was
// older than the API server's (on a busy API server the manager's own last
// write can reach the cache after the next pass has read it): the next pass,
// on the newer copy, writes what this one would have. It is no failure, so
// it is not logged as a reconciler error with a stack trace.
func RequeueOnConflict(ctx context.Context, res reconcile.Result, err error) (reconcile.Result, error) {
	if err == nil || !apierrors.IsConflict(err) {
		return res, err
	}
	log.FromContext(ctx).V(1).Info("the object changed since this pass read it; passing again", "error", err.Error())
	return reconcile.Result{RequeueAfter: ConflictRetry}, nil
}
