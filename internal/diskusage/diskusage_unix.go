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
