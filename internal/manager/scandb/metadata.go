package scandb

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"
)

// maxMetadata bounds metadata.json, a few hundred bytes in Trivy's DB.
const maxMetadata = 64 << 10

// Metadata is what a DB archive's metadata.json says of the DB.
type Metadata struct {
	Version   int       `json:"Version"`
	UpdatedAt time.Time `json:"UpdatedAt"`
}

// ReadMetadata reads metadata.json from a DB archive (a gzipped tar of
// trivy.db and metadata.json, in either order). The archive comes from the
// DB's repository, outside the cluster: an archive without the file, with
// a file too large or not JSON, is an error, never a guess.
func ReadMetadata(archive io.Reader) (Metadata, error) {
	gz, err := gzip.NewReader(archive)
	if err != nil {
		return Metadata{}, fmt.Errorf("the DB archive: %w", err)
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Metadata{}, errors.New("the DB archive has no metadata.json")
		}
		if err != nil {
			return Metadata{}, fmt.Errorf("the DB archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg || path.Clean(h.Name) != "metadata.json" {
			continue
		}
		if h.Size > maxMetadata {
			return Metadata{}, fmt.Errorf("the DB archive's metadata.json has %d bytes, more than %d", h.Size, maxMetadata)
		}
		var m Metadata
		if err := json.NewDecoder(io.LimitReader(tr, maxMetadata)).Decode(&m); err != nil {
			return Metadata{}, fmt.Errorf("the DB archive's metadata.json: %w", err)
		}
		if m.Version <= 0 {
			return Metadata{}, fmt.Errorf("the DB archive's metadata.json names no schema version")
		}
		return m, nil
	}
}
