//go:build windows

package diskusage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/windows"
)

// Stat reads the usage of the volume holding path, which must be a
// directory (GetDiskFreeSpaceExW takes no file).
func Stat(path string) (Usage, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return Usage{}, fmt.Errorf("disk usage of %s: %w", path, err)
	}
	// Free to the caller, not free in all: quotas apply, as they do to the
	// runtime writing images.
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return Usage{}, fmt.Errorf("disk usage of %s: %w", path, err)
	}
	return Usage{Capacity: total, Available: avail}, nil
}

// SameFilesystem reports whether a and b lie on one volume, and whether
// that could be told: false when either cannot be read here.
func SameFilesystem(a, b string) (same, known bool) {
	va, vb := filepath.VolumeName(a), filepath.VolumeName(b)
	if _, err := os.Stat(a); err != nil || va == "" {
		return false, false
	}
	if _, err := os.Stat(b); err != nil || vb == "" {
		return false, false
	}
	return strings.EqualFold(va, vb), true
}
