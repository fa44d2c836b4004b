//go:build unix

package nodestate

import (
	"errors"
	"syscall"
)

// DiskFull is whether err says the state's disk has no room left.
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskFullError is the error a write to a full disk returns here.
var diskFullError error = syscall.ENOSPC
