//go:build unix

package criorecords

import (
	"io/fs"
	"syscall"
)

// fileID names a file whatever its names: its device and inode.
type fileID struct{ dev, ino uint64 }

// hardLinked is the file's ID when it has more than one name.
func hardLinked(info fs.FileInfo) (fileID, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileID{}, false
	}
	// Dev and Ino are not uint64 on every unix.
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}
