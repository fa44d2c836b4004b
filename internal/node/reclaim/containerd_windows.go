package reclaim

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/leftover"
)

// reclaimContainerd is not built on Windows, where leftovers are not read.
func reclaimContainerd(_ context.Context, _ string, _ Runtime, take []leftover.Leftover, _ Policy, _ bool) []Result {
	out := make([]Result, 0, len(take))
	for _, l := range take {
		out = append(out, Result{Leftover: l, Outcome: Found, Detail: "reclaiming is not done on Windows nodes"})
	}
	return out
}
