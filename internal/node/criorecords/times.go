package criorecords

import "time"

// Times returns when each image of the store at root arrived, keyed by its
// ID and by each of its names, as the remover looks ages up: when its
// record was made, the pull. CRI-O's CRI answers carry no pull time (its
// verbose image status has only the image's own config, whose "created" is
// the build time); the records have one for every image, read from the
// image records alone. Records
// without a time are left out: their images count from when Eraser first
// sees them. A root with several drivers' records gives the times of all:
// an image's time does not depend on its driver.
func Times(root string) (map[string]time.Time, error) {
	drivers, err := Drivers(root)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, driver := range drivers {
		images, err := Images(root, driver)
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
