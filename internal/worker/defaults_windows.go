//go:build windows

package worker

import "github.com/eraser-oss/eraser/internal/paths"

// NodeOS is the OS this worker binary runs on.
const NodeOS = paths.Windows
