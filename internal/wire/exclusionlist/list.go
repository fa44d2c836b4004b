// Package exclusionlist reads one exclusion-list ConfigMap, the contract
// between the manager, which warns of what it finds in one, and the
// workers, which read the same keys from the ConfigMap mounted as a
// directory. The format is upstream Eraser's: {"excluded": ["image", ...]}.
//
// Any list upstream accepted is read, never refused, since a refusal stops
// every node's run: each entry as imageref.ParsePattern reads it, and the
// document as upstream's decoder did or more protectively. What upstream
// read differently is returned as Notes, for the manager's warnings and
// migrate check. A list upstream refused (the key it read holds no
// document) is an error, as it was there.
package exclusionlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/eraser-oss/eraser/internal/util/strictkeys"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// MaxKey bounds one key: a ConfigMap holds at most 1 MiB.
const MaxKey = 1 << 20

// field is the document's one field.
const field = "excluded"

// Note is something in a list that is read differently from upstream, or
// ignored: Entry is the entry (or the field) concerned, "" for a whole key.
type Note struct {
	Key     string
	Entry   string
	Reading string
}

func (n Note) String() string {
	if n.Entry == "" {
		return fmt.Sprintf("key %q: %s", n.Key, n.Reading)
	}
	return fmt.Sprintf("key %q, entry %q: %s", n.Key, n.Entry, n.Reading)
}

// List is one ConfigMap's exclusions.
type List struct {
	Patterns []imageref.Pattern
	Notes    []Note
}

// How a document is read where upstream read it differently.
const (
	ReadingUnknownField = "unknown field, ignored as upstream did"
	ReadingRecased      = `read as "excluded", as upstream did`
	ReadingRepeated     = `"excluded" given again: every list given is read (upstream kept only the last)`
	ReadingNull         = "null: no entries, as upstream read it"
	ReadingIgnoredKey   = "holds no exclusion list and is ignored, as upstream ignored every key but the first ending in .json: "
)

// UpstreamKey is the key upstream read, the first in name order ending in
// ".json", or "" if none does.
func UpstreamKey(keys []string) string {
	sorted := slices.Sorted(slices.Values(keys))
	for _, k := range sorted {
		if strings.HasSuffix(k, ".json") {
			return k
		}
	}
	return ""
}

// Read reads every key of one ConfigMap (its data and binary data), in
// name order. Every key holding a list is read, not only upstream's: an
// exclusion a user wrote is never dropped. A key holding none is ignored
// with a Note, unless it is the one upstream read, where the error is
// returned as upstream's worker failed on it.
func Read(keys map[string][]byte) (List, error) {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	upstream := UpstreamKey(names)
	var out List
	for _, k := range names {
		pats, notes, err := Parse(k, keys[k])
		if err != nil {
			if k == upstream {
				return List{}, err
			}
			out.Notes = append(out.Notes, Note{Key: k, Reading: ReadingIgnoredKey + err.Error()})
			continue
		}
		out.Patterns = append(out.Patterns, pats...)
		out.Notes = append(out.Notes, notes...)
	}
	return out, nil
}

// Parse reads one key's document; key names it in notes and errors.
func Parse(key string, data []byte) ([]imageref.Pattern, []Note, error) {
	if len(data) > MaxKey {
		return nil, nil, fmt.Errorf("exclusion list %s is larger than %d bytes", key, MaxKey)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	entries, notes, err := document(dec, key)
	if err != nil {
		return nil, nil, fmt.Errorf(`exclusion list %s: want {"excluded": ["image", ...]}: %w`, key, err)
	}
	// Upstream's decoder refused anything after the document but white
	// space: a second document would be a list that is not what it seems.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("exclusion list %s: data after the first JSON document (one {\"excluded\": [...]} per key)", key)
	}
	pats := make([]imageref.Pattern, 0, len(entries))
	for _, s := range entries {
		p := imageref.ParsePattern(s)
		if r := p.Legacy(); r != "" {
			notes = append(notes, Note{Key: key, Entry: s, Reading: r})
		}
		pats = append(pats, p)
	}
	return pats, notes, nil
}

// document reads one object, collecting the entries of every field that
// decodes into "excluded", as upstream's struct did, and skipping others.
func document(dec *json.Decoder, key string) ([]string, []Note, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok == nil {
		return nil, []Note{{Key: key, Reading: ReadingNull}}, nil
	}
	if tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("not an object (%v)", tok)
	}
	var entries []string
	var notes []Note
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name, _ := tok.(string)
		if !strictkeys.SameField(name, field) {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
			notes = append(notes, Note{Key: key, Entry: name, Reading: ReadingUnknownField})
			continue
		}
		var list []string
		if err := dec.Decode(&list); err != nil {
			return nil, nil, fmt.Errorf("%q: %w", name, err)
		}
		if name != field {
			notes = append(notes, Note{Key: key, Entry: name, Reading: ReadingRecased})
		}
		if seen {
			notes = append(notes, Note{Key: key, Entry: name, Reading: ReadingRepeated})
		}
		seen = true
		entries = append(entries, list...)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	return entries, notes, nil
}

// ReadConfigMap reads a ConfigMap's data and binary data as Read does, as
// a worker reads the ConfigMap mounted.
func ReadConfigMap(data map[string]string, binary map[string][]byte) (List, error) {
	keys := make(map[string][]byte, len(data)+len(binary))
	for k, v := range data {
		keys[k] = []byte(v)
	}
	for k, v := range binary {
		keys[k] = v
	}
	return Read(keys)
}
