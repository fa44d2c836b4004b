package nodereport

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKind(t *testing.T) {
	type kc struct{ Kind, Cause string }
	for name, tc := range map[string]struct {
		node Node
		want kc
	}{
		"not started, with its cause": {Node{Reason: Reason(KindNotStarted, "FailureBudgetExceeded")}, kc{KindNotStarted, "FailureBudgetExceeded"}},
		"not started, no cause":       {Node{Reason: "NotStarted"}, kc{KindNotStarted, ""}},
		"skipped":                     {Node{Reason: "Skipped/NotReady"}, kc{KindSkipped, "NotReady"}},
		"a failed node's reason":      {Node{Failed: true, Reason: "PodFailed"}, kc{}},
		"failed, whatever it says":    {Node{Failed: true, Reason: "NotStarted/WaitTimedOut"}, kc{}},
		"a word that only begins so":  {Node{Reason: "NotStartedYet"}, kc{}},
		"ran":                         {Node{}, kc{}},
	} {
		t.Run(name, func(t *testing.T) {
			k, c := tc.node.Kind()
			if diff := cmp.Diff(tc.want, kc{k, c}); diff != "" {
				t.Errorf("kind (-want +got):\n%s", diff)
			}
		})
	}
}
