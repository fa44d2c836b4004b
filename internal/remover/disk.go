package remover

import (
	"context"
	"errors"
	"fmt"

	"github.com/eraser-oss/eraser/internal/diskusage"
	"github.com/eraser-oss/eraser/internal/retention"
)

// mountpointer is a runtime that names its image filesystems (cri.Client).
type mountpointer interface {
	ImageFsMountpoints(ctx context.Context) ([]string, error)
}

// ImageFsMeter measures the image filesystem at path, or, when path is
// empty, at the mount point the runtime reports (a Windows HostProcess pod,
// or "eraser node prune" on the node itself, sees it directly). A runtime
// naming several image filesystems is measured at the first: runtimes
// report the one holding images first.
func ImageFsMeter(rt mountpointer, path string) func(context.Context) (retention.Disk, error) {
	return func(ctx context.Context) (retention.Disk, error) {
		at := path
		if at == "" {
			mounts, err := rt.ImageFsMountpoints(ctx)
			if err != nil {
				return retention.Disk{}, err
			}
			if len(mounts) == 0 {
				return retention.Disk{}, errors.New("the runtime names no image filesystem (CRI ImageFsInfo)")
			}
			at = mounts[0]
		}
		u, err := diskusage.Stat(at)
		if err != nil {
			return retention.Disk{}, fmt.Errorf("measuring the image filesystem: %w", err)
		}
		return retention.Disk{Capacity: u.Capacity, Available: u.Available}, nil
	}
}
