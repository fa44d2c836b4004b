package remover

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/diskusage"
	"github.com/eraser-oss/eraser/internal/node/retention"
)

// ErrImageFsElsewhere is wrapped by the error of a measurement that could
// only be taken on another filesystem than the runtime's image filesystem:
// the node fails, rather than a disk policy judged by the wrong disk.
var ErrImageFsElsewhere = errors.New("the disk that would be measured is not the image filesystem")

// mountpointer is a runtime that names its image filesystems (cri.Client).
type mountpointer interface {
	ImageFsMountpoints(ctx context.Context) ([]string, error)
}

// ImageFsMeter measures the image filesystem. Without path it is measured
// at the mount point the runtime reports (a Windows HostProcess pod, or
// "eraser node prune" on the node itself, sees it directly). With path (a
// Linux pod's read-only mount of the host directory at the same path) it
// is measured at the reported mount point when that lies under path, since
// the mount carries the host's submounts (a snapshotter on a disk of its
// own), and at path otherwise. A runtime naming several image filesystems
// is measured at the first: runtimes report the one holding images first.
func ImageFsMeter(rt mountpointer, path string) func(context.Context) (retention.Disk, error) {
	return func(ctx context.Context) (retention.Disk, error) {
		mounts, err := rt.ImageFsMountpoints(ctx)
		if err != nil && path == "" {
			return retention.Disk{}, err
		}
		at := path
		if len(mounts) > 0 && (path == "" || within(mounts[0], path)) {
			at = mounts[0]
		}
		if len(mounts) > 0 && at != mounts[0] {
			// The runtime names a mount outside path. Where this process
			// sees it and it is another filesystem than path's, the disk
			// measured would not be the disk freed: above the threshold
			// every candidate would be drained, below it nothing ever
			// removed. Where it cannot be seen (a pod whose host paths
			// are mapped), path is measured, and a drain that frees
			// nothing measurable stops (drainDisk).
			if same, known := diskusage.SameFilesystem(mounts[0], path); known && !same {
				return retention.Disk{}, fmt.Errorf("%w: the runtime's image filesystem is at %s, on another filesystem than retention.imageFsPath %s; set imageFsPath to it or a directory above it",
					ErrImageFsElsewhere, mounts[0], path)
			}
		}
		if at == "" {
			return retention.Disk{}, errors.New("the runtime names no image filesystem (CRI ImageFsInfo)")
		}
		u, err := diskusage.Stat(at)
		if err != nil {
			return retention.Disk{}, fmt.Errorf("measuring the image filesystem: %w", err)
		}
		return retention.Disk{Capacity: u.Capacity, Available: u.Available}, nil
	}
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
