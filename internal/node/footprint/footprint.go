// Package footprint tells how many bytes images hold on a node's image
// filesystem that nothing else does, from the runtime's own records: what
// removing them should free, shared layers counted once. The remover
// compares it with what the image filesystem really gained (Freed).
package footprint

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/cri"
)

// Store is one reading of a runtime's records.
type Store interface {
	// Exclusive is the bytes only these images hold: what the runtime
	// frees once all of them are removed.
	Exclusive(images []cri.Image) uint64
	// Total is the bytes every record of the store takes.
	Total() uint64
}

// Reader reads the runtime's records.
type Reader func(ctx context.Context) (Store, error)
