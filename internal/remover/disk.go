package remover

import (
	"context"
	"errors"

	"github.com/eraser-oss/eraser/internal/retention"
)

// ImageFsMeter measures the image filesystem at path, or, when path is
// empty, at the mount point the runtime reports.
func ImageFsMeter(rt any, path string) func(context.Context) (retention.Disk, error) {
	return func(context.Context) (retention.Disk, error) {
		return retention.Disk{}, errors.New("not wired yet")
	}
}
