//go:build windows

package nodestate

import (
	"errors"

	"golang.org/x/sys/windows"
)

// DiskFull is whether err says the state's disk has no room left.
func DiskFull(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}

// diskFullError is the error a write to a full disk returns here.
var diskFullError error = windows.ERROR_DISK_FULL
