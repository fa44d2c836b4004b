//go:build !linux || (cgo && !exclude_graphdriver_btrfs)

package reclaim

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// reclaimCRIO: CRI-O runs on Linux only, and containers/storage, which
// CRI-O's leftovers are deleted through, links its btrfs driver's C
// library into a cgo build unless that driver is left out: the project's
// binaries are built without cgo (make sets CGO_ENABLED=0).
func reclaimCRIO(_ context.Context, _ CRIOStore, _ map[leftoverkind.Kind]bool, _ Runtime, take []leftover.Leftover, _ bool) []Result {
	out := make([]Result, 0, len(take))
	for _, l := range take {
		out = append(out, Result{Leftover: l, Outcome: Failed, Detail: crioUnsupported})
	}
	return out
}

const crioUnsupported = "this binary reclaims nothing on CRI-O: it was built for another OS, or with cgo and containers/storage's btrfs driver (build with CGO_ENABLED=0 or -tags exclude_graphdriver_btrfs)"
