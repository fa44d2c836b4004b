//go:build windows

package worker

import "github.com/eraser-oss/eraser/internal/paths"

// nodeOS is the OS this worker binary runs on.
const nodeOS = paths.Windows
