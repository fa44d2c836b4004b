//go:build linux

package reclaim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// recordsFile is one of containers/storage's records files and the JSON
// keys of its records that this build's containers/storage keeps.
type recordsFile struct {
	Path  string
	Known map[string]bool
}

// maxRecordsBytes bounds a records file read for its keys, as
// criorecords bounds its reading.
const maxRecordsBytes = 64 << 20

// unknownRecordKeys are the keys of the records in data that known does
// not name, sorted: containers/storage writes a records file again from
// its own types on every change, so a key its types lack is dropped from
// every record of the file. An empty file holds no records.
func unknownRecordKeys(data []byte, known map[string]bool) ([]string, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var records []map[string]json.RawMessage
	if err := json.Unmarshal(data, &records); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range records {
		for k := range r {
			if !known[k] {
				seen[k] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// newerRecords says which records files hold keys this build would drop,
// or "": a newer containers/storage (a newer CRI-O) wrote them.
func newerRecords(files []recordsFile) (string, error) {
	var why []string
	for _, f := range files {
		data, err := readBounded(f.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		keys, err := unknownRecordKeys(data, f.Known)
		if err != nil {
			return "", fmt.Errorf("%s is not containers/storage's records: %w", f.Path, err)
		}
		if len(keys) > 0 {
			why = append(why, fmt.Sprintf("%s has fields this build's containers/storage does not know (%s) and would drop from every record", filepath.Base(f.Path), joinQuoted(keys)))
		}
	}
	if len(why) == 0 {
		return "", nil
	}
	return "CRI-O's store is not written: " + strings.Join(why, "; "), nil
}

// readBounded reads a records file, refusing one over maxRecordsBytes.
func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxRecordsBytes {
		return nil, fmt.Errorf("%s is over %d MiB: not read", path, maxRecordsBytes>>20)
	}
	return data, nil
}

func joinQuoted(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
