package imagestore

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Store is one containers/storage root as CRI-O and Podman leave it, read
// without its locks: the scanner's view of the node's images is a
// read-only mount, and a record or layer that changes under it fails that
// image's scan (which keeps the image), never the run.
//
// Layout read here (driver "overlay" by default):
//
//	<root>/<driver>-images/images.json      image records
//	<root>/<driver>-images/<id>/<key file>  an image's "big data": its config, manifests
//	<root>/<driver>-layers/layers.json      layer records (digests, parent)
//	<root>/<driver>-layers/<id>.tar-split.gz the layer tar's headers, for reassembly
//	<root>/<driver>/<id>/diff               the layer's files
type Store struct {
	root, driver string
}

// Image is the part of an image record the scanner needs.
type Image struct {
	ID string `json:"id"`
	// Digest is the digest of the manifest the image was pulled by.
	Digest   string   `json:"digest"`
	Names    []string `json:"names"`
	TopLayer string   `json:"layer"`
	// BigData are the keys of the image's stored documents: its config
	// under the config's digest, its manifests under "manifest" and
	// "manifest-<digest>".
	BigData []string `json:"big-data-names"`
}

// Layer is the part of a layer record the scanner needs.
type Layer struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	// DiffDigest is the digest of the uncompressed tar (the config's diff
	// ID); CompressedDigest and CompressedSize are the registry blob's,
	// when the layer was pulled.
	DiffDigest       string `json:"diff-digest"`
	DiffSize         int64  `json:"diff-size"`
	CompressedDigest string `json:"compressed-diff-digest"`
	CompressedSize   int64  `json:"compressed-size"`
}

// maxBigData bounds one stored document read into memory: configs and
// manifests are kilobytes; a config of a thousand-layer image is well
// under a megabyte.
const maxBigData = 16 << 20

// Open finds the store's driver from its image records. A root holding
// records of more than one driver is refused: containers/storage uses one
// driver per root, and guessing would read another store's layers.
func Open(root string) (*Store, error) {
	files, err := filepath.Glob(filepath.Join(root, "*-images", "images.json"))
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	switch len(files) {
	case 0:
		return nil, fmt.Errorf("%w in %s (want %s)", ErrNoStore, root, filepath.Join(root, "<driver>-images", "images.json"))
	case 1:
	default:
		return nil, fmt.Errorf("image store %s has the records of several drivers (%s): pass one root per driver", root, strings.Join(files, ", "))
	}
	driver := strings.TrimSuffix(filepath.Base(filepath.Dir(files[0])), "-images")
	return &Store{root: root, driver: driver}, nil
}

// Driver is the store's storage driver.
func (s *Store) Driver() string { return s.driver }

// Images reads the image records.
func (s *Store) Images() ([]Image, error) {
	var out []Image
	if err := readJSON(filepath.Join(s.root, s.driver+"-images", "images.json"), &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Layers reads the layer records, keyed by layer ID.
func (s *Store) Layers() (map[string]Layer, error) {
	var recs []Layer
	if err := readJSON(filepath.Join(s.root, s.driver+"-layers", "layers.json"), &recs); err != nil {
		return nil, err
	}
	out := make(map[string]Layer, len(recs))
	for _, l := range recs {
		out[l.ID] = l
	}
	return out, nil
}

// Chain returns the layers of the image whose top layer is top, base
// first, as the config's diff IDs list them.
func Chain(layers map[string]Layer, top string) ([]Layer, error) {
	var chain []Layer
	for id := top; id != ""; {
		l, ok := layers[id]
		if !ok {
			return nil, fmt.Errorf("layer %s is not in the store's layer records", id)
		}
		chain = append(chain, l)
		// A store has at most a few thousand layers; a longer chain is a
		// loop in damaged records.
		if len(chain) > len(layers) {
			return nil, fmt.Errorf("the parents of layer %s loop", top)
		}
		id = l.Parent
	}
	for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
		chain[i], chain[j] = chain[j], chain[i]
	}
	return chain, nil
}

// ErrNoBigData means the image has no stored document under the key.
var ErrNoBigData = errors.New("no such document stored with the image")

// BigData reads one of the image's stored documents.
func (s *Store) BigData(img Image, key string) ([]byte, error) {
	found := false
	for _, k := range img.BigData {
		found = found || k == key
	}
	if !found {
		return nil, fmt.Errorf("image %s, %q: %w", img.ID, key, ErrNoBigData)
	}
	if !storeID(img.ID) {
		return nil, fmt.Errorf("image ID %q is not a store ID", img.ID)
	}
	data, err := readLimited(filepath.Join(s.root, s.driver+"-images", img.ID, bigDataFile(key)), maxBigData)
	if err != nil {
		return nil, fmt.Errorf("image %s, %q: %w", img.ID, key, err)
	}
	return data, nil
}

// bigDataFile is the file name containers/storage gives a document's key:
// the key itself when it is only lower-case letters, digits and dots, else
// "=" and the key in standard base64 (a digest key has a colon).
func bigDataFile(key string) string {
	for _, r := range key {
		if r != '.' && (r < '0' || r > '9') && (r < 'a' || r > 'z') {
			return "=" + base64.StdEncoding.EncodeToString([]byte(key))
		}
	}
	return key
}

func readJSON(file string, v any) error {
	data, err := readLimited(file, maxRecords)
	if err != nil {
		return fmt.Errorf("reading the image store's records: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s is not containers/storage's records: %w", file, err)
	}
	return nil
}

func readLimited(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is over %d MiB: not read", file, limit>>20)
	}
	return data, nil
}
