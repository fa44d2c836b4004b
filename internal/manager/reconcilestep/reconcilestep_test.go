package reconcilestep

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestWrap(t *testing.T) {
	cause := errors.New("refused")
	if err := Wrap("create", nil); err != nil {
		t.Errorf("Wrap of nil = %v, want nil", err)
	}
	err := Wrap("create", cause)
	if err.Error() != "create: refused" || !errors.Is(err, cause) {
		t.Errorf("Wrap = %v, want %q wrapping the cause", err, "create: refused")
	}
}

func TestRequeueOnConflict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "eraser.sh", Resource: "imagejobs"}, "j", errors.New("the object has been modified"))
	other := errors.New("connection refused")
	for name, tc := range map[string]struct {
		res     reconcile.Result
		err     error
		want    reconcile.Result
		wantErr error
	}{
		"success keeps its result":        {res: reconcile.Result{RequeueAfter: time.Minute}, want: reconcile.Result{RequeueAfter: time.Minute}},
		"an error stays an error":         {err: other, wantErr: other},
		"a conflict passes again shortly": {res: reconcile.Result{RequeueAfter: time.Minute}, err: fmt.Errorf("run: %w", fmt.Errorf("status: %w", conflict)), want: reconcile.Result{RequeueAfter: ConflictRetry}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := RequeueOnConflict(context.Background(), tc.res, tc.err)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}
