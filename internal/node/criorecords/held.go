package criorecords

// Held is what a set of images and containers holds, by ID: the records
// containers/storage keeps for as long as one of them is there.
type Held struct {
	Images, Layers map[string]bool
}

// HeldBy is what the store's images and containers hold, but for the images
// in skipImages and the containers in skipContainers (by ID):
//
//   - an image holds its top layer and mapped top layers, and their parents;
//   - a container holds its read-write layer and that layer's parents (the
//     image's layers), and its image: containers/storage does not delete an
//     image a container was made from while the container is there.
//
// Held records include IDs the records name but hold no record of (a layer
// a removal deleted from under an image): they take no bytes here.
func HeldBy(r Records, skipImages, skipContainers map[string]bool) Held {
	parent := make(map[string]string, len(r.Layers))
	for _, l := range r.Layers {
		parent[l.ID] = l.Parent
	}
	images := make(map[string]Image, len(r.Images))
	for _, img := range r.Images {
		images[img.ID] = img
	}
	h := Held{Images: map[string]bool{}, Layers: map[string]bool{}}
	layer := func(id string) {
		// Each layer is visited once: a chain ends at the base, at a layer
		// without a record, or where it meets what is already held (a loop
		// in damaged records included).
		for id != "" && !h.Layers[id] {
			h.Layers[id] = true
			id = parent[id]
		}
	}
	image := func(id string) {
		if id == "" || h.Images[id] {
			return
		}
		h.Images[id] = true
		img := images[id]
		layer(img.TopLayer)
		for _, m := range img.MappedTopLayers {
			layer(m)
		}
	}
	for _, img := range r.Images {
		if !skipImages[img.ID] {
			image(img.ID)
		}
	}
	for _, c := range r.Containers {
		if !skipContainers[c.ID] {
			image(c.Image)
			layer(c.Layer)
		}
	}
	return h
}

// Minus is what h holds and o does not.
func (h Held) Minus(o Held) Held {
	out := Held{Images: map[string]bool{}, Layers: map[string]bool{}}
	for id := range h.Images {
		if !o.Images[id] {
			out.Images[id] = true
		}
	}
	for id := range h.Layers {
		if !o.Layers[id] {
			out.Layers[id] = true
		}
	}
	return out
}

// Bytes is the disk the held records take by their records: their layers'
// diff sizes and their images' documents. A container's read-write layer
// has no diff size; LayerDiskBytes measures it.
func (r Records) Bytes(h Held) int64 {
	var n int64
	counted := map[string]bool{}
	for _, l := range r.Layers {
		if h.Layers[l.ID] && !counted[l.ID] {
			counted[l.ID] = true
			n = add(n, l.DiffBytes)
		}
	}
	clear(counted)
	for _, img := range r.Images {
		if h.Images[img.ID] && !counted[img.ID] {
			counted[img.ID] = true
			n = add(n, img.BigDataBytes)
		}
	}
	return n
}

// Exclusive is the bytes the images (by ID) hold that no other image and
// no container does: what removing them all frees. A layer they share is
// counted once; a layer another image or a container stands on is not
// counted, nor is an image a container was made from (containers/storage
// refuses to remove it). Unknown IDs hold nothing.
func Exclusive(r Records, imageIDs []string) int64 {
	skip := make(map[string]bool, len(imageIDs))
	for _, id := range imageIDs {
		skip[id] = true
	}
	return r.Bytes(HeldBy(r, nil, nil).Minus(HeldBy(r, skip, nil)))
}
