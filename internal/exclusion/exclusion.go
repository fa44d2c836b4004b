// Package exclusion reads exclusion lists in upstream Eraser's layout: each
// ConfigMap labelled eraser.sh/exclude.list=true is mounted into the worker
// as a directory named exclude-<configmap> under its working directory, and
// holds JSON files of the form {"excluded": ["docker.io/library/*", ...]}.
package exclusion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eraser-oss/eraser/internal/imageref"
)

// DirPrefix starts the name of every exclusion directory.
const DirPrefix = "exclude-"

// maxFile bounds one list: a ConfigMap holds at most 1 MiB.
const maxFile = 1 << 20

type document struct {
	Excluded []string `json:"excluded"`
}

// ReadDir reads every exclude-* directory under dir. Unlike upstream, which
// read only the first .json file of each, it reads them all: more lists can
// only protect more. A missing dir means no exclusions; a list that does not
// parse is an error, because guessing could remove what it meant to protect.
func ReadDir(dir string) ([]imageref.Pattern, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading exclusion directory %s: %w", dir, err)
	}
	var out []imageref.Pattern
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), DirPrefix) {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if st, err := os.Stat(sub); err != nil || !st.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(sub, "*.json"))
		if err != nil {
			return nil, err
		}
		slices.Sort(files)
		for _, f := range files {
			if strings.HasPrefix(filepath.Base(f), "..") {
				continue // ConfigMap volume internals
			}
			pats, err := ReadFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, pats...)
		}
	}
	return out, nil
}

// ReadFile reads one exclusion list.
func ReadFile(path string) ([]imageref.Pattern, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading exclusion list: %w", err)
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("exclusion list %s is larger than %d bytes", path, maxFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf(`exclusion list %s: want {"excluded": ["image", ...]}: %w`, path, err)
	}
	out := make([]imageref.Pattern, 0, len(doc.Excluded))
	for i, s := range doc.Excluded {
		p, err := imageref.ParsePattern(s)
		if err != nil {
			return nil, fmt.Errorf("exclusion list %s, excluded[%d]: %w", path, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}
