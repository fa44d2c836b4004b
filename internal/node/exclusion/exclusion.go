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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/strictkeys"
)

// DirPrefix starts the name of every exclusion directory.
const DirPrefix = "exclude-"

// maxFile bounds one list: a ConfigMap holds at most 1 MiB.
const maxFile = 1 << 20

type document struct {
	Excluded []string `json:"excluded"`
}

// ReadDir reads every exclude-* directory under dir, and every key of each:
// an exclusion a user wrote is never silently dropped. Unlike upstream, which
// read only the first file ending in .json, every file is read whatever its
// name, except the ConfigMap volume's own entries (names starting ".."),
// and each must be a list. A missing dir means no exclusions; anything that
// cannot be read or parsed is an error, and the worker then removes nothing:
// guessing could remove what a list meant to protect.
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
		pats, err := readList(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, pats...)
	}
	return out, nil
}

// readList reads every key of one mounted exclusion ConfigMap.
func readList(sub string) ([]imageref.Pattern, error) {
	st, err := os.Stat(sub)
	if err != nil {
		return nil, fmt.Errorf("exclusion list %s: %w", sub, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("exclusion list %s: not a directory (a ConfigMap is mounted as one)", sub)
	}
	keys, err := os.ReadDir(sub)
	if err != nil {
		return nil, fmt.Errorf("reading exclusion list %s: %w", sub, err)
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		if !strings.HasPrefix(k.Name(), "..") {
			names = append(names, k.Name())
		}
	}
	slices.Sort(names)
	var out []imageref.Pattern
	for _, name := range names {
		f := filepath.Join(sub, name)
		// Stat, not the entry's type: keys are symlinks into ..data.
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("exclusion list %s: %w", f, err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("exclusion list %s: not a file (%s)", f, st.Mode().Type())
		}
		pats, err := ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, pats...)
	}
	return out, nil
}

// ReadFile reads one exclusion list.
func ReadFile(path string) ([]imageref.Pattern, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading exclusion list: %w", err)
	}
	return Parse(path, data)
}

// Parse reads one exclusion list's content; name is for errors.
func Parse(path string, data []byte) ([]imageref.Pattern, error) {
	if len(data) > maxFile {
		return nil, fmt.Errorf("exclusion list %s is larger than %d bytes", path, maxFile)
	}
	// null would decode into an empty list: refuse anything but an object.
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return nil, fmt.Errorf(`exclusion list %s: want {"excluded": ["image", ...]}, not %.20q`, path, bytes.TrimSpace(data))
	}
	// A repeated or re-cased "excluded" would leave only the last list:
	// the images named before it would be unprotected.
	if err := strictkeys.JSON(data, "excluded"); err != nil {
		return nil, fmt.Errorf("exclusion list %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc document
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf(`exclusion list %s: want {"excluded": ["image", ...]}: %w`, path, err)
	}
	// A second document, or anything but white space, after the first would
	// be dropped by a decoder that stops there: the list is not what it seems.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("exclusion list %s: data after the first JSON document (one {\"excluded\": [...]} per key)", path)
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
