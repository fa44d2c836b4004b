package workerresult

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOutcomeWords: the outcomes are the keys of the summaries the manager
// sums, the words of the per-node reports and the values dashboards filter
// the logs by: each keeps its spelling, and Outcomes lists every one once.
func TestOutcomeWords(t *testing.T) {
	want := map[Outcome]string{
		Removed: "removed", InUse: "in use", Pinned: "pinned", Excluded: "excluded", Referenced: "referenced",
		NotRepullable: "not re-pullable", TooYoung: "too young", CoolingDown: "cooling down", RecentlyUsed: "recently used", NotNeeded: "not needed",
		GoneFromRegistry: "gone from registry", RegistryUnreachable: "registry unreachable",
		NotOnNode: "not on node", Refused: "refused", Failed: "failed", Invalid: "invalid",
	}
	got := map[Outcome]string{}
	for _, o := range Outcomes {
		if _, dup := got[o]; dup {
			t.Errorf("Outcomes lists %q twice", o)
		}
		got[o] = string(o)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
