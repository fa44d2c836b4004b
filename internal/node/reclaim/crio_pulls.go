//go:build linux

package reclaim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pullTempPrefix names the directory containers/image makes, in CRI-O's
// big_files_temporary_dir, for each pull into the store: it holds the
// pull's blobs from the first byte until the pull ends, and goes with it.
const pullTempPrefix = "container_images_storage"

// staleTemp is the age past which a pull's directory, nothing in it
// written since, is a killed CRI-O's and no pull's: a blob still
// arriving writes its file.
const staleTemp = 24 * time.Hour

// pullTemp is one pull's directory: its name and the last write in it.
type pullTemp struct {
	Name      string
	LastWrite time.Time
}

// pullUnderWay says which pull's directory shows a pull under way at now,
// or "": any not older than staleTemp. A pull held waiting on a blob writes
// nothing for a while, so no shorter age tells it from a finished one.
func pullUnderWay(temps []pullTemp, now time.Time) string {
	for _, t := range temps {
		if now.Sub(t.LastWrite) < staleTemp {
			return fmt.Sprintf("a pull is under way (%s, written %s ago): it may take up any layer that nothing holds", t.Name, now.Sub(t.LastWrite).Round(time.Second))
		}
	}
	return ""
}

// readPullTemps lists the pulls' directories in dir, each with the last
// write in it or its files. A dir the worker cannot see is an error: then
// whether a pull is under way is not known.
func readPullTemps(dir string) ([]pullTemp, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading CRI-O's directory for pulls in progress (big_files_temporary_dir): %w", err)
	}
	var out []pullTemp
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), pullTempPrefix) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		t := pullTemp{Name: filepath.Join(dir, e.Name()), LastWrite: info.ModTime()}
		files, err := os.ReadDir(t.Name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, f := range files {
			if fi, err := f.Info(); err == nil && fi.ModTime().After(t.LastWrite) {
				t.LastWrite = fi.ModTime()
			}
		}
		out = append(out, t)
	}
	return out, nil
}
