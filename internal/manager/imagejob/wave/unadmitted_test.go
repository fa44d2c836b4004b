package wave

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A kubelet's refusal takes the creation backoff and marks the failure as
// the kubelet's; the API server's next refusal clears the mark.
func TestUnadmitted(t *testing.T) {
	f := Unadmitted(CreateFailure{}, false, t0, "OutOfcpu")
	if diff := cmp.Diff(CreateFailure{First: t0, Next: t0.Add(createBackoffMin), Attempts: 1, Message: "OutOfcpu", Admission: true}, f); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	f = Refused(f, true, t0, "forbidden")
	if f.Admission || f.Attempts != 2 || f.First != t0 {
		t.Errorf("after the API server's refusal: %+v", f)
	}
}
