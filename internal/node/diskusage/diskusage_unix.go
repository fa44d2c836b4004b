//go:build !windows

package diskusage

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Stat reads the usage of the filesystem holding path.
func Stat(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	// The field types differ between systems; the kubelet reads the same three.
	bsize := uint64(st.Bsize)
	return Usage{Capacity: uint64(st.Blocks) * bsize, Available: uint64(st.Bavail) * bsize}, nil
}

// SameFilesystem reports whether a and b lie on one filesystem (one device
// number), and whether that could be told: false when either cannot be
// read here.
func SameFilesystem(a, b string) (same, known bool) {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return false, false
	}
	return sa.Dev == sb.Dev, true
}
