package reportcmd

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestDeletedRun(t *testing.T) {
	ready := func(reason string) metav1.Condition {
		return metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: 3}
	}
	for name, tc := range map[string]struct {
		list *eraserv1.ImageList
		want string
	}{
		"the current run deleted": {builder.MakeImageList("l").Condition(ready(eraserv1.ReasonRunDeleted)).Obj(),
			"the run of generation 3 was deleted before it finished and has no report (its nodes' outcomes are unknown); this is the last run recorded before it"},
		"the last run failed": {builder.MakeImageList("l").Condition(ready(eraserv1.ReasonFailureBudgetExceeded)).Obj(), ""},
		"no condition":        {builder.MakeImageList("l").Obj(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := deletedRun(tc.list); got != tc.want {
				t.Errorf("note %q, want %q", got, tc.want)
			}
		})
	}
}
