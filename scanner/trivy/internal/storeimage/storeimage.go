// Package storeimage reads images from a containers/storage image store,
// CRI-O's (and Podman's), mounted read-only into the scanner: no registry
// pull, no export to an archive, and no CRI-O API, which has no call that
// returns an image's content. Each layer is the tar the node pulled,
// rebuilt from the store and checked against its diff ID
// (criorecords.LayerTar), so the scanner judges exactly the bytes the node
// runs.
package storeimage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/ctrdimage"
)

// DefaultRoot is CRI-O's image store on a node, manager.retention.imageFsPath's
// default for runtime crio.
const DefaultRoot = "/var/lib/containers/storage"

// Store opens images of one containers/storage root.
type Store struct {
	root string
}

// Open opens the store at root, which holds the records of one storage
// driver; its records are read at each Open, as CRI-O pulls and removes
// while the scan runs.
func Open(root string) (*Store, error) {
	if _, err := criorecords.Driver(root); err != nil {
		return nil, fmt.Errorf("CRI-O's image store: %w", err)
	}
	return &Store{root: root}, nil
}

// Close releases nothing: no file stays open between scans.
func (s *Store) Close() error { return nil }

// Open finds the image by its ID (CRI-O's IDs are the config digest's hex),
// then by its names, and returns it as a go-containerregistry image whose
// layers are rebuilt from the store when read. A name that leads to another
// image than the ID names (the image was removed and the name pulled again
// as other content since it was listed) is passed over; when no name leads
// to the image, Open fails with scan.ErrOtherContent.
func (s *Store) Open(_ context.Context, ref handoff.Image) (*ctrdimage.Image, error) {
	records, err := criorecords.Read(s.root)
	if err != nil {
		return nil, err
	}
	rec, err := find(records.Images, ref)
	if err != nil {
		return nil, err
	}
	layers := make(map[string]criorecords.Layer, len(records.Layers))
	for _, l := range records.Layers {
		layers[l.ID] = l
	}
	img, err := s.image(records.Driver, rec, layers)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", rec.ID, err)
	}
	return ctrdimage.Wrap(img, ref), nil
}

func find(recs []criorecords.Image, ref handoff.Image) (criorecords.Image, error) {
	want, check := scanshare.Digest(ref.ImageID)
	id := strings.TrimPrefix(ref.ImageID, "sha256:")
	for _, r := range recs {
		if id != "" && r.ID == id {
			return r, nil
		}
	}
	var moved []string
	for _, name := range ref.Names {
		for _, r := range recs {
			if !slices.Contains(r.Names, name) {
				continue
			}
			if check && "sha256:"+r.ID != want {
				moved = append(moved, name+" is sha256:"+r.ID)
				continue
			}
			return r, nil
		}
	}
	if len(moved) > 0 {
		return criorecords.Image{}, fmt.Errorf("%s: %w: %s", ref.ImageID, scan.ErrOtherContent, strings.Join(moved, ", "))
	}
	return criorecords.Image{}, fmt.Errorf("%s: %w", ref.ImageID, ctrdimage.ErrNotFound)
}

func (s *Store) image(driver string, rec criorecords.Image, records map[string]criorecords.Layer) (*image, error) {
	cfgKey := "sha256:" + rec.ID
	raw, err := bigData(s.root, driver, rec, cfgKey)
	if err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("its config: %w", err)
	}
	chain, err := layerChain(records, rec.TopLayer)
	if err != nil {
		return nil, err
	}
	if len(chain) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("its config lists %d layers and the store %d", len(cfg.RootFS.DiffIDs), len(chain))
	}
	img := &image{rawConfig: raw, config: cfg}
	for i, l := range chain {
		if l.DiffDigest != cfg.RootFS.DiffIDs[i].String() {
			return nil, fmt.Errorf("layer %d is %s in its config and %s in the store", i, cfg.RootFS.DiffIDs[i], l.DiffDigest)
		}
		img.layers = append(img.layers, &layer{root: s.root, driver: driver, rec: l})
	}
	img.manifest, img.rawManifest, err = img.buildManifest()
	if err != nil {
		return nil, err
	}
	return img, nil
}

// image is a stored image as a v1.Image. Its manifest is made from the
// config and the layer records: the stored manifests may be an index's or
// another platform's, and Trivy needs only the config and the layers.
type image struct {
	rawConfig   []byte
	config      *v1.ConfigFile
	layers      []*layer
	manifest    *v1.Manifest
	rawManifest []byte
}

func (i *image) buildManifest() (*v1.Manifest, []byte, error) {
	cfgHash, cfgSize, err := v1.SHA256(bytes.NewReader(i.rawConfig))
	if err != nil {
		return nil, nil, err
	}
	m := &v1.Manifest{
		SchemaVersion: 2, MediaType: types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Digest: cfgHash, Size: cfgSize},
	}
	for _, l := range i.layers {
		d, err := l.Digest()
		if err != nil {
			return nil, nil, err
		}
		size, _ := l.Size()
		mt, _ := l.MediaType()
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: mt, Digest: d, Size: size})
	}
	raw, err := json.Marshal(m)
	return m, raw, err
}

func (i *image) Layers() ([]v1.Layer, error) {
	out := make([]v1.Layer, len(i.layers))
	for n, l := range i.layers {
		out[n] = l
	}
	return out, nil
}

func (i *image) MediaType() (types.MediaType, error) { return i.manifest.MediaType, nil }
func (i *image) Size() (int64, error)                { return int64(len(i.rawManifest)), nil }
func (i *image) ConfigName() (v1.Hash, error)        { return i.manifest.Config.Digest, nil }
func (i *image) ConfigFile() (*v1.ConfigFile, error) { return i.config.DeepCopy(), nil }
func (i *image) RawConfigFile() ([]byte, error)      { return i.rawConfig, nil }
func (i *image) Manifest() (*v1.Manifest, error)     { return i.manifest.DeepCopy(), nil }
func (i *image) RawManifest() ([]byte, error)        { return i.rawManifest, nil }

func (i *image) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(i.rawManifest))
	return h, err
}

func (i *image) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	for _, l := range i.layers {
		if d, _ := l.Digest(); d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("layer %s is not in the image", h)
}

func (i *image) LayerByDiffID(h v1.Hash) (v1.Layer, error) {
	for _, l := range i.layers {
		if d, _ := l.DiffID(); d == h {
			return l, nil
		}
	}
	return nil, fmt.Errorf("layer with diff ID %s is not in the image", h)
}

// layer is one stored layer. Its digest is the registry blob's when the
// layer was pulled (the store records it), else its diff ID, as an
// uncompressed layer's digest is.
type layer struct {
	root, driver string
	rec          criorecords.Layer
}

func (l *layer) pulled() bool { return strings.HasPrefix(l.rec.CompressedDigest, "sha256:") }

func (l *layer) Digest() (v1.Hash, error) {
	if l.pulled() {
		return v1.NewHash(l.rec.CompressedDigest)
	}
	return l.DiffID()
}

func (l *layer) DiffID() (v1.Hash, error) { return v1.NewHash(l.rec.DiffDigest) }

func (l *layer) Size() (int64, error) {
	if l.pulled() {
		return l.rec.CompressedBytes, nil
	}
	return l.rec.DiffBytes, nil
}

func (l *layer) MediaType() (types.MediaType, error) {
	if l.pulled() {
		return types.OCILayer, nil
	}
	return types.OCIUncompressedLayer, nil
}

// Uncompressed is what the scanner reads: the rebuilt, checked tar.
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	return layerTar(l.root, l.driver, l.rec)
}

// Compressed is refused: the store keeps the layer unpacked, and any
// compression made here would not be the blob its Digest names. Trivy reads
// layers uncompressed.
func (l *layer) Compressed() (io.ReadCloser, error) {
	return nil, fmt.Errorf("layer %s: the image store keeps layers unpacked; read it uncompressed", l.rec.ID)
}
