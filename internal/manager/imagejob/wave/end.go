// The end of a run: when it is over, and what its outcome is.

package wave

import (
	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// Ended is whether the run is over: every node reached with none left
// waiting, or the run halted by its failure budget, and no pod running
// any longer (a halted run lets its running pods finish).
func Ended(p Progress, halted bool) bool {
	return (p.Started == p.Eligible && p.Waiting == 0 || halted) && p.Active == 0
}

// Result is the phase an ended run finishes in and its success ratio. The
// ratio is over the nodes the job was meant to run on, in floating point;
// skipped nodes are not successes. A run over its failure budget (halted)
// failed, whatever the ratio.
func Result(p Progress, successRatio float64, halted bool) (eraserv1.JobPhase, float64) {
	ratio := 1.0
	if p.Eligible > 0 {
		ratio = float64(p.Succeeded) / float64(p.Eligible)
	}
	if ratio >= successRatio && !halted {
		return eraserv1.PhaseCompleted, ratio
	}
	return eraserv1.PhaseFailed, ratio
}
