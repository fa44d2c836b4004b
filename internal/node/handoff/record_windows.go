//go:build windows

package handoff

import (
	"io/fs"
	"os"
)

// openRecord opens the collector's record for reading, which must be a
// regular file and not a link. Windows has no O_NOFOLLOW: the kind is
// checked by name before the open, which a peer could race; on Windows
// every container of the pod is the host's SYSTEM, so a peer gains nothing
// by it that it does not hold already.
func openRecord(path string) (*os.File, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: notEndpoint(path, "a regular file")}
	}
	return os.Open(path)
}
