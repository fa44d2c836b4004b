package storagerecords

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// LayerDir is where the driver keeps the files of the layer: for overlay,
// <root>/overlay/<id>/diff; for vfs, <root>/vfs/dir/<id>. Other drivers
// (btrfs, zfs) keep layers as volumes, not measured here.
func LayerDir(root, driver, layerID string) (string, error) {
	if !pathElement(driver) || !pathElement(layerID) {
		return "", fmt.Errorf("layer %q of driver %q: not a store ID", layerID, driver)
	}
	switch driver {
	case "overlay", "overlay2":
		return filepath.Join(root, driver, layerID, "diff"), nil
	case "vfs":
		return filepath.Join(root, driver, "dir", layerID), nil
	default:
		return "", fmt.Errorf("layers of the %s driver are not measured (overlay and vfs are)", driver)
	}
}

// LayerDiskBytes is the disk a layer's own files take: what deleting the
// layer frees. A container's read-write layer has no diff size in its
// record, and a layer whose making was cut short has none to trust; this
// measures them. It is the sum of the sizes of the layer's regular files, a
// file linked under several names counted once; symbolic links are not
// followed, and files removed while it walks are left out (a running
// container writes to its layer). A layer whose directory is missing is an
// error wrapping fs.ErrNotExist.
func LayerDiskBytes(root, driver, layerID string) (int64, error) {
	dir, err := LayerDir(root, driver, layerID)
	if err != nil {
		return 0, err
	}
	var n int64
	linked := map[fileID]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if id, ok := hardLinked(info); ok {
			if linked[id] {
				return nil
			}
			linked[id] = true
		}
		n = add(n, info.Size())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring layer %s: %w", layerID, err)
	}
	return n, nil
}

// pathElement: s names one entry of a directory, nothing above or below it.
func pathElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}
