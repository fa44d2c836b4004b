package wave

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// TestEnded: a run ends once every node was reached and none waits, or
// once its budget halted it, and in either case no pod runs any longer.
func TestEnded(t *testing.T) {
	cases := map[string]struct {
		p      Progress
		halted bool
		want   bool
	}{
		"no nodes":                             {want: true},
		"every node reached and done":          {p: Progress{Eligible: 3, Started: 3, Succeeded: 2, Failed: 1}, want: true},
		"a pod still runs":                     {p: Progress{Eligible: 3, Started: 3, Succeeded: 2, Active: 1}},
		"nodes not reached yet":                {p: Progress{Eligible: 3, Started: 2, Succeeded: 2}},
		"a reached node waits for another run": {p: Progress{Eligible: 3, Started: 3, Succeeded: 2, Waiting: 1}},
		"halted, a pod still runs":             {p: Progress{Eligible: 9, Started: 3, Failed: 2, Active: 1}, halted: true},
		"halted, its pods done":                {p: Progress{Eligible: 9, Started: 3, Failed: 2, Succeeded: 1}, halted: true, want: true},
		"halted with nodes waiting":            {p: Progress{Eligible: 9, Started: 3, Failed: 2, Waiting: 1}, halted: true, want: true},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = Ended(tc.p, tc.halted), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ended (-want +got):\n%s", diff)
	}
}

// TestResult: the phase by the success ratio over the eligible nodes, and
// Failed for a halted run whatever its ratio.
func TestResult(t *testing.T) {
	type result struct {
		Phase eraserv1.JobPhase
		Ratio float64
	}
	cases := map[string]struct {
		p      Progress
		want   float64
		halted bool
		out    result
	}{
		"no eligible nodes":       {want: 1, out: result{eraserv1.PhaseCompleted, 1}},
		"every node":              {p: Progress{Eligible: 4, Succeeded: 4}, want: 1, out: result{eraserv1.PhaseCompleted, 1}},
		"at the ratio":            {p: Progress{Eligible: 4, Succeeded: 3, Failed: 1}, want: 0.75, out: result{eraserv1.PhaseCompleted, 0.75}},
		"below the ratio":         {p: Progress{Eligible: 4, Succeeded: 2, Failed: 2}, want: 0.75, out: result{eraserv1.PhaseFailed, 0.5}},
		"halted above the ratio":  {p: Progress{Eligible: 4, Succeeded: 3, Failed: 1}, want: 0.5, halted: true, out: result{eraserv1.PhaseFailed, 0.75}},
		"waiting are not success": {p: Progress{Eligible: 4, Succeeded: 3, Waiting: 1}, want: 1, out: result{eraserv1.PhaseFailed, 0.75}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		phase, ratio := Result(tc.p, tc.want, tc.halted)
		got[name], want[name] = result{phase, ratio}, tc.out
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}
