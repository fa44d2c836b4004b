// Package criorecords reads the records containers/storage keeps in a
// store's root (CRI-O's image store, /var/lib/containers/storage): its
// images, the layers they stand on and the containers made from them. It is
// the one reader of these files. What an image removal left behind on a
// CRI-O node is found in these records (internal/node/leftover), and so is
// what removing images frees: CRI-O's CRI shows only images, never the
// layers and container storage under them. The scanner finds an image's
// layers and documents in them (scanner/trivy/internal/storeimage).
//
// The records are read from the files alone, without the store's locks and
// without CRI-O: the node worker mounts the store read-only. Layout (driver
// "overlay" by default):
//
//	<root>/<driver>-images/images.json                  image records
//	<root>/<driver>-layers/layers.json                  layer records
//	<root>/<driver>-layers/volatile-layers.json         layers kept without fsync
//	<root>/<driver>-containers/containers.json          container records
//	<root>/<driver>-containers/volatile-containers.json containers kept without fsync
//	<root>/<driver>/<layer ID>/diff                     a layer's files
//
// CRI-O (1.34) keeps its containers, pod sandboxes included, and their
// read-write layers in the volatile files; containers.json may not exist.
// With transient_store set, containers/storage keeps the volatile files
// under its run root instead, and they are not read here.
package criorecords

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Records are one store's records.
type Records struct {
	Driver     string
	Images     []Image
	Layers     []Layer
	Containers []Container
}

// Image is an image record.
type Image struct {
	ID    string
	Names []string
	// TopLayer is the image's topmost layer; the rest are its parents.
	TopLayer string
	// MappedTopLayers are copies of the top layer with other ID mappings
	// (user namespaces), on the same parent.
	MappedTopLayers []string
	// BigDataNames are the keys of the documents stored with the image:
	// its config under the config's digest, its manifests under
	// "manifest" and "manifest-<digest>".
	BigDataNames []string
	// BigDataBytes is the size of the documents stored with the image
	// (its manifests, its config), the sum of its big-data-sizes.
	BigDataBytes int64
	// Created is when the record was made: when the image arrived on the
	// node (its pull), not its build time.
	Created time.Time
}

// Layer is a layer record.
type Layer struct {
	ID, Parent string
	// DiffBytes is the layer's diff-size, the length of the uncompressed
	// tar it was made from: about the disk its files take. Zero when the
	// layer was not made from a tar (a container's read-write layer) or
	// its making did not finish.
	DiffBytes int64
	// DiffDigest is the digest of that tar: the image config's diff ID.
	// CompressedDigest and CompressedBytes are the registry blob's, when
	// the layer was pulled.
	DiffDigest       string
	CompressedDigest string
	CompressedBytes  int64
	// Incomplete: the layer is flagged incomplete, as containers/storage
	// flags a layer while it makes or deletes it; one still flagged is
	// what an interrupted pull or removal left.
	Incomplete bool
	// Volatile: the record is in volatile-layers.json.
	Volatile bool
	Created  time.Time
}

// Container is a container record: the storage of one container or pod
// sandbox (CRI-O's infra container), by its CRI ID.
type Container struct {
	ID string
	// Image is the ID of the image the container was made from.
	Image string
	// Layer is the container's read-write layer, whose parent is the
	// image's top layer.
	Layer string
	Names []string
	// PodID is the pod sandbox's ID CRI-O writes in the record's metadata;
	// empty in the records of other users of the store (Podman, Buildah).
	PodID    string
	Volatile bool
	Created  time.Time
}

// maxRecords bounds the bytes read from one records file: a node's records
// are a few hundred bytes per image, layer and container, so 64 MiB is far
// beyond any node's.
const maxRecords = 64 << 20

// ErrNoStore means root holds no image records (not a containers/storage
// root, or a driver's records missing).
var ErrNoStore = errors.New("no containers/storage image records")

// Read reads the records of the store at root. Its driver is the one whose
// image records are there; a root with the records of several drivers is
// refused, as containers/storage uses one driver per root. Missing layer or
// container records are none (a store that never ran a container has no
// containers.json); records that are there but not containers/storage's
// are an error naming the file.
func Read(root string) (Records, error) {
	drivers, err := Drivers(root)
	if err != nil {
		return Records{}, err
	}
	if len(drivers) > 1 {
		var found []string
		for _, d := range drivers {
			found = append(found, filepath.Join(root, fileNames(d)[imagesFile]))
		}
		return Records{}, fmt.Errorf("image store %s has the records of several drivers (%s): pass one root per driver", root, strings.Join(found, ", "))
	}
	driver := drivers[0]
	var data files
	for i, name := range fileNames(driver) {
		if data[i], err = readFile(filepath.Join(root, name), i != imagesFile); err != nil {
			return Records{}, err
		}
	}
	r, err := parse(driver, data)
	if err != nil {
		return Records{}, fmt.Errorf("image store %s: %w", root, err)
	}
	return r, nil
}

// Drivers are the storage drivers whose image records are under root, at
// least one: ErrNoStore when there are none.
func Drivers(root string) ([]string, error) {
	found, err := filepath.Glob(filepath.Join(root, "*-images", "images.json"))
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w in %s (want %s)", ErrNoStore, root, filepath.Join(root, "<driver>-images", "images.json"))
	}
	out := make([]string, 0, len(found))
	for _, f := range found {
		out = append(out, strings.TrimSuffix(filepath.Base(filepath.Dir(f)), "-images"))
	}
	return out, nil
}

// Driver is the storage driver of the store at root, which has the image
// records of one.
func Driver(root string) (string, error) {
	drivers, err := Drivers(root)
	if err != nil {
		return "", err
	}
	if len(drivers) > 1 {
		return "", fmt.Errorf("image store %s has the records of several drivers (%s)", root, strings.Join(drivers, ", "))
	}
	return drivers[0], nil
}

// Images reads the image records of driver's store under root alone, as
// Read reads them: for who needs no layer or container (the images'
// ages).
func Images(root, driver string) ([]Image, error) {
	var data files
	var err error
	if data[imagesFile], err = readFile(filepath.Join(root, fileNames(driver)[imagesFile]), false); err != nil {
		return nil, err
	}
	r, err := parse(driver, data)
	if err != nil {
		return nil, fmt.Errorf("image store %s: %w", root, err)
	}
	return r.Images, nil
}

// The records files, in the order they are read: a record in two files is
// taken from the first.
const (
	imagesFile = iota
	layersFile
	volatileLayersFile
	containersFile
	volatileContainersFile
	numFiles
)

// files are the contents of a store's records files; nil or empty when a
// file holds no records.
type files [numFiles][]byte

func fileNames(driver string) [numFiles]string {
	return [numFiles]string{
		imagesFile:             filepath.Join(driver+"-images", "images.json"),
		layersFile:             filepath.Join(driver+"-layers", "layers.json"),
		volatileLayersFile:     filepath.Join(driver+"-layers", "volatile-layers.json"),
		containersFile:         filepath.Join(driver+"-containers", "containers.json"),
		volatileContainersFile: filepath.Join(driver+"-containers", "volatile-containers.json"),
	}
}

// parse makes the records of a store's files, each record once by ID;
// records without an ID are left out. An error names the file, under the
// root.
func parse(driver string, data files) (Records, error) {
	names := fileNames(driver)
	decode := func(i int, v any) error {
		// An empty file holds no records, as containers/storage reads it.
		if len(data[i]) == 0 {
			return nil
		}
		if err := json.Unmarshal(data[i], v); err != nil {
			return fmt.Errorf("%s is not containers/storage's records: %w", names[i], err)
		}
		return nil
	}
	r := Records{Driver: driver}

	var images []imageRecord
	if err := decode(imagesFile, &images); err != nil {
		return Records{}, err
	}
	seen := map[string]bool{}
	for _, rec := range images {
		if rec.ID == "" || seen[rec.ID] {
			continue
		}
		seen[rec.ID] = true
		img := Image{ID: rec.ID, Names: rec.Names, TopLayer: rec.TopLayer, MappedTopLayers: rec.MappedTopLayers,
			BigDataNames: rec.BigDataNames, Created: rec.Created}
		for _, n := range rec.BigDataSizes {
			img.BigDataBytes = add(img.BigDataBytes, n)
		}
		r.Images = append(r.Images, img)
	}

	clear(seen)
	for _, i := range []int{layersFile, volatileLayersFile} {
		var layers []layerRecord
		if err := decode(i, &layers); err != nil {
			return Records{}, err
		}
		for _, rec := range layers {
			if rec.ID == "" || seen[rec.ID] {
				continue
			}
			seen[rec.ID] = true
			r.Layers = append(r.Layers, Layer{ID: rec.ID, Parent: rec.Parent, DiffBytes: max(rec.DiffSize, 0),
				DiffDigest: rec.DiffDigest, CompressedDigest: rec.CompressedDigest, CompressedBytes: max(rec.CompressedSize, 0),
				Incomplete: rec.Flags[incompleteFlag] == true, Volatile: i == volatileLayersFile, Created: rec.Created})
		}
	}

	clear(seen)
	for _, i := range []int{containersFile, volatileContainersFile} {
		var containers []containerRecord
		if err := decode(i, &containers); err != nil {
			return Records{}, err
		}
		for _, rec := range containers {
			if rec.ID == "" || seen[rec.ID] {
				continue
			}
			seen[rec.ID] = true
			r.Containers = append(r.Containers, Container{ID: rec.ID, Image: rec.Image, Layer: rec.Layer, Names: rec.Names,
				PodID: podID(rec.Metadata), Volatile: i == volatileContainersFile, Created: rec.Created})
		}
	}
	return r, nil
}

// incompleteFlag is the layer flag containers/storage sets, true, while it
// makes or deletes a layer.
const incompleteFlag = "incomplete"

// The parts of the records read here, by containers/storage's JSON names.
type imageRecord struct {
	ID              string           `json:"id"`
	Names           []string         `json:"names"`
	TopLayer        string           `json:"layer"`
	MappedTopLayers []string         `json:"mapped-layers"`
	BigDataNames    []string         `json:"big-data-names"`
	BigDataSizes    map[string]int64 `json:"big-data-sizes"`
	Created         time.Time        `json:"created"`
}

type layerRecord struct {
	ID               string         `json:"id"`
	Parent           string         `json:"parent"`
	DiffSize         int64          `json:"diff-size"`
	DiffDigest       string         `json:"diff-digest"`
	CompressedDigest string         `json:"compressed-diff-digest"`
	CompressedSize   int64          `json:"compressed-size"`
	Flags            map[string]any `json:"flags"`
	Created          time.Time      `json:"created"`
}

type containerRecord struct {
	ID    string   `json:"id"`
	Names []string `json:"names"`
	Image string   `json:"image"`
	Layer string   `json:"layer"`
	// Metadata is a string its maker chose: CRI-O's is JSON.
	Metadata string    `json:"metadata"`
	Created  time.Time `json:"created"`
}

// podID is the "pod-id" of CRI-O's metadata; none in anyone else's.
func podID(metadata string) string {
	var m struct {
		PodID string `json:"pod-id"`
	}
	if json.Unmarshal([]byte(metadata), &m) != nil {
		return ""
	}
	return m.PodID
}

// add is a+b for sizes, negative ones (unknown) left out and the sum held
// at the largest int64 rather than wrapping, whatever the records say.
func add(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// readFile reads one records file, bounded; a missing one holds no
// records when optional.
func readFile(file string, optional bool) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the image store's records: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecords+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(data) > maxRecords {
		return nil, fmt.Errorf("%s is over %d MiB: not read", file, maxRecords>>20)
	}
	return data, nil
}
