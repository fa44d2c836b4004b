// Package imagestore reads when each image arrived on a CRI-O node from the
// image store CRI-O keeps (containers/storage): CRI-O's CRI answers carry
// no pull time (its verbose image status has only the image's own config,
// whose "created" is the build time), but the store records, for every
// image, when it was written to the node.
//
// The store's records are <root>/<driver>-images/images.json (overlay-images
// with the overlay driver), a JSON array whose entries carry the image's ID,
// names and "created", the time the record was made: the pull.
package imagestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// maxRecords bounds the bytes read: a node's records are a few hundred
// bytes per image, so 64 MiB is far beyond any node's.
const maxRecords = 64 << 20

// record is the part of a store entry read here.
type record struct {
	ID      string    `json:"id"`
	Names   []string  `json:"names"`
	Created time.Time `json:"created"`
}

// ErrNoStore means root holds no image records (not a containers/storage
// root, or a driver's records missing).
var ErrNoStore = errors.New("no containers/storage image records")

// Times returns when each image of the store at root arrived, keyed by its
// ID and by each of its names, as the remover looks ages up. Records
// without a time are left out: their images count from when Eraser first
// sees them.
func Times(root string) (map[string]time.Time, error) {
	files, err := filepath.Glob(filepath.Join(root, "*-images", "images.json"))
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w in %s (want %s)", ErrNoStore, root, filepath.Join(root, "<driver>-images", "images.json"))
	}
	out := map[string]time.Time{}
	for _, file := range files {
		recs, err := read(file)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.ID == "" || r.Created.IsZero() {
				continue
			}
			for _, key := range append([]string{r.ID}, r.Names...) {
				if t, ok := out[key]; !ok || r.Created.After(t) {
					out[key] = r.Created
				}
			}
		}
	}
	return out, nil
}

func read(file string) ([]record, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading the image store's records: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecords+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(data) > maxRecords {
		return nil, fmt.Errorf("%s is over %d MiB: not read", file, maxRecords>>20)
	}
	var recs []record
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("%s is not containers/storage's image records: %w", file, err)
	}
	return recs, nil
}
