package leftover

import (
	"fmt"
	"sort"
	"time"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// CRIOOptions set what counts as a leftover on CRI-O.
type CRIOOptions struct {
	// Live are the IDs of the containers and pod sandboxes CRI-O's CRI
	// lists, which are their storage's IDs. Nil when unknown: then no
	// container is judged an orphan.
	Live map[string]bool
	// SizeOf measures the disk a layer takes (criorecords.LayerDiskBytes)
	// when its record has no size to trust: a container's read-write
	// layer, a layer whose making or deleting was cut short. Nil counts
	// those by their records (0).
	SizeOf func(layerID string) int64
	// MinAge: records younger than this, at Now, are not judged, nor the
	// layers under a layer that young: a pull writes its layers before
	// the image that holds them, and CRI-O writes a container's storage
	// before its CRI lists the container. While any layer a pull could
	// have written is this young, no layer nothing holds is judged
	// (Pulling). It should be longer than the longest wait for one blob.
	MinAge time.Duration
	Now    time.Time
}

// Pulling says why a pull may be under way in the store, or "": a layer
// that is no container's read-write layer was written less than minAge
// before now. A pull commits its layers one by one as their blobs arrive,
// and may take up any layer already in the store whose contents it needs
// (containers/image reuses a layer found by its uncompressed digest, and
// reads it before it writes the layer it makes from it), not only the
// chain it has written: while one may be running, no layer that nothing
// holds is judged, whichever chain it is on.
func Pulling(r criorecords.Records, minAge time.Duration, now time.Time) string {
	containerLayers := map[string]bool{}
	for _, c := range r.Containers {
		containerLayers[c.Layer] = true
	}
	var newest criorecords.Layer
	for _, l := range r.Layers {
		if !containerLayers[l.ID] && l.Created.After(newest.Created) {
			newest = l
		}
	}
	if newest.Created.IsZero() || now.Sub(newest.Created) >= minAge {
		return ""
	}
	return fmt.Sprintf("layer %s was written %s ago, under the record age %s: a pull may be under way, and may take up any layer", newest.ID, now.Sub(newest.Created).Round(time.Second), minAge)
}

// CRIO finds the leftovers in a CRI-O store's records, largest first. A
// layer's Bytes are its own (a layer under it nothing holds either is a
// leftover of its own); a container's are its read-write layer's and those
// of whatever only it holds.
func CRIO(r criorecords.Records, o CRIOOptions) []Leftover {
	layers := make(map[string]criorecords.Layer, len(r.Layers))
	for _, l := range r.Layers {
		if _, ok := layers[l.ID]; !ok {
			layers[l.ID] = l
		}
	}
	measured := map[string]uint64{}
	size := func(id string) uint64 {
		if n, ok := measured[id]; ok {
			return n
		}
		l, ok := layers[id]
		n := l.DiffBytes
		if (!ok || n == 0 || l.Incomplete) && o.SizeOf != nil {
			n = o.SizeOf(id)
		}
		measured[id] = uint64(max(n, 0))
		return measured[id]
	}
	young := func(t time.Time) bool { return !t.IsZero() && o.Now.Sub(t) < o.MinAge }
	busy := map[string]bool{}
	for _, l := range r.Layers {
		if young(l.Created) {
			for id := l.ID; id != "" && !busy[id]; id = layers[id].Parent {
				busy[id] = true
			}
		}
	}
	pulling := Pulling(r, o.MinAge, o.Now)

	held := criorecords.HeldBy(r, nil, nil)
	var out []Leftover
	judged := map[string]bool{}
	for _, l := range r.Layers {
		if judged[l.ID] || busy[l.ID] {
			continue
		}
		judged[l.ID] = true
		switch {
		case l.Incomplete:
			out = append(out, Leftover{Kind: leftoverkind.IncompleteLayer, Name: l.ID, Bytes: size(l.ID),
				Why: "flagged incomplete: a pull or a removal of it was cut short; containers/storage deletes it when CRI-O next starts"})
		case !held.Layers[l.ID] && pulling == "":
			out = append(out, Leftover{Kind: leftoverkind.UnreferencedLayer, Name: l.ID, Bytes: size(l.ID),
				Why: "no image or container stands on this layer: what a removal cut short leaves, kept until deleted by hand"})
		}
	}

	if o.Live != nil {
		orphans := map[string]bool{}
		for _, c := range r.Containers {
			// Containers without a pod are Podman's or Buildah's, which
			// CRI-O's CRI never lists.
			if c.PodID == "" || o.Live[c.ID] || young(c.Created) || orphans[c.ID] {
				continue
			}
			orphans[c.ID] = true
			only := held.Minus(criorecords.HeldBy(r, nil, map[string]bool{c.ID: true}))
			l := Leftover{Kind: leftoverkind.OrphanContainer, Name: c.ID,
				Why: "storage of a container or pod sandbox CRI-O no longer lists: its root filesystem left behind (cri-o/cri-o#6981)"}
			if len(c.Names) > 0 {
				l.Name += " (" + c.Names[0] + ")"
			}
			for id := range only.Layers {
				l.Bytes += size(id)
			}
			for _, img := range r.Images {
				if only.Images[img.ID] {
					l.Bytes += uint64(max(img.BigDataBytes, 0))
				}
			}
			out = append(out, l)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Name < out[j].Name
	})
	return out
}
