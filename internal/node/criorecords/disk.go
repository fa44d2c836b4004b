package criorecords

import (
	"context"
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
//
// A tenant writes these files: the walk ends at ctx's end, past
// DefaultWalkLimits' entries or hard-linked files, with what it counted so
// far and an error wrapping ErrWalkLimit (or ctx's error).
func LayerDiskBytes(ctx context.Context, root, driver, layerID string) (int64, error) {
	return layerDiskBytes(ctx, root, driver, layerID, DefaultWalkLimits)
}

// WalkLimits bound a layer's walk: the entries visited and the files with
// several names remembered (to count each once), which the worker keeps in
// memory under its limit.
type WalkLimits struct {
	Entries, Linked int
}

// DefaultWalkLimits: a million entries, far beyond an image's layer;
// 65,536 hard-linked files, about 4 MiB remembered.
var DefaultWalkLimits = WalkLimits{Entries: 1 << 20, Linked: 1 << 16}

// ErrWalkLimit: a layer has more entries, or more hard-linked files, than
// a walk measures.
var ErrWalkLimit = errors.New("the layer has more files than are measured")

func layerDiskBytes(ctx context.Context, root, driver, layerID string, limits WalkLimits) (int64, error) {
	dir, err := LayerDir(root, driver, layerID)
	if err != nil {
		return 0, err
	}
	var n int64
	entries := 0
	linked := map[fileID]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != dir && errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if entries++; entries > limits.Entries {
			return fmt.Errorf("%w: over %d entries", ErrWalkLimit, limits.Entries)
		}
		if entries%1024 == 1 {
			if err := ctx.Err(); err != nil {
				return err
			}
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
			if len(linked) >= limits.Linked {
				return fmt.Errorf("%w: over %d files with several names", ErrWalkLimit, limits.Linked)
			}
			linked[id] = true
		}
		n = add(n, info.Size())
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("measuring layer %s: %w", layerID, err)
	}
	return n, nil
}

// pathElement: s names one entry of a directory, nothing above or below it.
func pathElement(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}
