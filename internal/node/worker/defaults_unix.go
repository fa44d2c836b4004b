//go:build !windows

package worker

import "github.com/eraser-oss/eraser/internal/wire/podpaths"

// NodeOS is the OS this worker binary runs on.
const NodeOS = podpaths.Linux
