// Package imagestore reads when each image arrived on a CRI-O node from the
// image store CRI-O keeps (containers/storage): CRI-O's CRI answers carry
// no pull time (its verbose image status has only the image's own config,
// whose "created" is the build time), but the store records, for every
// image, when it was written to the node.
//
// The store's records are <root>/<driver>-images/images.json (overlay-images
// with the overlay driver), a JSON array whose entries carry the image's ID,
// names and "created", the time the record was made: the pull. They are
// read by internal/node/criorecords, which reads the rest of the store's
// records for the leftovers and the bytes removals free: one parser of
// them, bounded once.
package imagestore

import (
	"time"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// maxRecords bounds the bytes of the image and layer records the scanner
// reads (Store): a node's records are a few hundred bytes per image, so
// 64 MiB is far beyond any node's.
const maxRecords = 64 << 20

// ErrNoStore means root holds no image records (not a containers/storage
// root, or a driver's records missing). It is criorecords' error, so
// that either package's callers can tell it.
var ErrNoStore = criorecords.ErrNoStore

// Times returns when each image of the store at root arrived, keyed by its
// ID and by each of its names, as the remover looks ages up. Records
// without a time are left out: their images count from when Eraser first
// sees them. A root with several drivers' records gives the times of all:
// an image's time does not depend on its driver.
func Times(root string) (map[string]time.Time, error) {
	drivers, err := criorecords.Drivers(root)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, driver := range drivers {
		images, err := criorecords.Images(root, driver)
		if err != nil {
			return nil, err
		}
		for _, img := range images {
			if img.Created.IsZero() {
				continue
			}
			for _, key := range append([]string{img.ID}, img.Names...) {
				if t, ok := out[key]; !ok || img.Created.After(t) {
					out[key] = img.Created
				}
			}
		}
	}
	return out, nil
}
