//go:build windows

package diskusage

import (
	"fmt"

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
