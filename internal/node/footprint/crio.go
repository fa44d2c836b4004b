package footprint

import (
	"context"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// CRIO reads the containers/storage store CRI-O keeps at root.
func CRIO(root string) Reader {
	return func(context.Context) (Store, error) {
		r, err := criorecords.Read(root)
		if err != nil {
			return nil, err
		}
		return crioStore{r}, nil
	}
}

type crioStore struct{ r criorecords.Records }

// Exclusive counts CRI images by ID: CRI-O's image IDs are the store's.
func (s crioStore) Exclusive(images []cri.Image) uint64 {
	ids := make([]string, 0, len(images))
	for _, img := range images {
		ids = append(ids, img.ID)
	}
	return uint64(max(criorecords.Exclusive(s.r, ids), 0))
}

func (s crioStore) Total() uint64 {
	all := criorecords.Held{Images: map[string]bool{}, Layers: map[string]bool{}}
	for _, img := range s.r.Images {
		all.Images[img.ID] = true
	}
	for _, l := range s.r.Layers {
		all.Layers[l.ID] = true
	}
	return uint64(max(s.r.Bytes(all), 0))
}
