// Package atomicfile replaces a file whole: the node's small records (its
// state, the removal ledger, the hand-off, cached registry answers) are
// read by workers that may start while another writes, and must see the
// previous file or the new one, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to a temporary file beside path, syncs it and renames
// it over path. On failure the temporary file is removed and path is left
// as it was; the error wraps the system's (a full disk stays recognisable).
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
