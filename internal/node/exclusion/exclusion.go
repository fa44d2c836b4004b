// Package exclusion reads exclusion lists in upstream Eraser's layout: each
// ConfigMap labelled eraser.sh/exclude.list=true is mounted into the worker
// as a directory named exclude-<configmap> under its working directory, and
// each of its keys is read as package exclusionlist reads a ConfigMap.
package exclusion

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// DirPrefix starts the name of every exclusion directory.
const DirPrefix = "exclude-"

// ReadDir reads every exclude-* directory under dir, and every key of each,
// except the ConfigMap volume's own entries (names starting ".."). A
// missing dir means no exclusions. The notes say what is read differently
// from upstream, each key named by its path under dir. A list that cannot
// be read (a key that is no file, or the key upstream read holding no
// list) is an error, and the worker then removes nothing: guessing could
// remove what a list meant to protect.
func ReadDir(dir string) ([]imageref.Pattern, []exclusionlist.Note, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading exclusion directory %s: %w", dir, err)
	}
	var pats []imageref.Pattern
	var notes []exclusionlist.Note
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), DirPrefix) {
			continue
		}
		list, err := readList(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		pats = append(pats, list.Patterns...)
		for _, n := range list.Notes {
			n.Key = e.Name() + "/" + n.Key
			notes = append(notes, n)
		}
	}
	return pats, notes, nil
}

// readList reads every key of one mounted exclusion ConfigMap.
func readList(sub string) (exclusionlist.List, error) {
	st, err := os.Stat(sub)
	if err != nil {
		return exclusionlist.List{}, fmt.Errorf("exclusion list %s: %w", sub, err)
	}
	if !st.IsDir() {
		return exclusionlist.List{}, fmt.Errorf("exclusion list %s: not a directory (a ConfigMap is mounted as one)", sub)
	}
	entries, err := os.ReadDir(sub)
	if err != nil {
		return exclusionlist.List{}, fmt.Errorf("reading exclusion list %s: %w", sub, err)
	}
	keys := map[string][]byte{}
	for _, k := range entries {
		if strings.HasPrefix(k.Name(), "..") {
			continue
		}
		f := filepath.Join(sub, k.Name())
		// Stat, not the entry's type: keys are symlinks into ..data.
		st, err := os.Stat(f)
		if err != nil {
			return exclusionlist.List{}, fmt.Errorf("exclusion list %s: %w", f, err)
		}
		if !st.Mode().IsRegular() {
			return exclusionlist.List{}, fmt.Errorf("exclusion list %s: not a file (%s)", f, st.Mode().Type())
		}
		if st.Size() > exclusionlist.MaxKey {
			return exclusionlist.List{}, fmt.Errorf("exclusion list %s is larger than %d bytes", f, exclusionlist.MaxKey)
		}
		if keys[k.Name()], err = os.ReadFile(f); err != nil {
			return exclusionlist.List{}, fmt.Errorf("reading exclusion list: %w", err)
		}
	}
	list, err := exclusionlist.Read(keys)
	if err != nil {
		return exclusionlist.List{}, fmt.Errorf("%s: %w", sub, err)
	}
	return list, nil
}

// ReadFile reads one exclusion list, a file holding one document.
func ReadFile(path string) ([]imageref.Pattern, []exclusionlist.Note, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading exclusion list: %w", err)
	}
	return exclusionlist.Parse(path, data)
}
