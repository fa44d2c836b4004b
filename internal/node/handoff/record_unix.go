//go:build !windows

package handoff

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openRecord opens the collector's record for reading, which must be a
// regular file and not a link: the scanner can write the shared directory
// too, and a link would have the remover read whatever file it names, a
// FIFO hold it in open(2) for ever. The kind is checked on the descriptor
// opened (see openEndpoint).
func openRecord(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: notEndpoint(path, "a regular file")}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: notEndpoint(path, "a regular file")}
	}
	return os.NewFile(uintptr(fd), path), nil
}
