// Package ctrdimage reads images straight from a containerd content store,
// so the scanner scans what the node already has: no registry pull, and no
// export of the whole image to a temporary archive (which is what Trivy's
// own containerd source does, at the cost of the image's size in disk
// writes on every scan).
package ctrdimage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Namespace is where the CRI plugin keeps Kubernetes' images.
const Namespace = "k8s.io"

// ErrNotFound: none of the image's names is known to the runtime.
var ErrNotFound = errors.New("image not found in the runtime")

// Store opens images of one containerd.
type Store struct {
	client *containerd.Client
	// platform chooses the manifest of a multi-platform image: the node's.
	platform platforms.MatchComparer
}

// Dial connects to containerd's socket (the pod's CRI socket is the same
// socket for containerd).
func Dial(address, namespace string) (*Store, error) {
	c, err := containerd.New(address, containerd.WithDefaultNamespace(namespace))
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", address, err)
	}
	return &Store{client: c, platform: platforms.Default()}, nil
}

// Close closes the connection.
func (s *Store) Close() error { return s.client.Close() }

// Open finds the image under its ID, then its names, then its digests (the
// CRI plugin records all three) and returns it as a go-containerregistry
// image whose blobs are read from the content store on demand. Only the
// image's own content is opened: an image imported with ctr has no record
// of its ID, and a name found instead may have moved to other content since
// the image was listed (a new import of the same tag); such a name is
// passed over, and when no name leads to the image's content, Open fails
// with scan.ErrOtherContent.
func (s *Store) Open(ctx context.Context, img handoff.Image) (*Image, error) {
	want, check := scanshare.Digest(img.ImageID)
	cs := s.client.ContentStore()
	var moved []string
	for _, name := range candidates(img) {
		rec, err := s.client.ImageService().Get(ctx, name)
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("looking up %s: %w", name, err)
		}
		manifest, raw, err := resolve(ctx, cs, rec.Target, s.platform)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", rec.Name, err)
		}
		if got := manifest.Config.Digest.String(); check && got != want {
			moved = append(moved, name+" is "+got)
			continue
		}
		return newImage(ctx, cs, manifest, raw, img)
	}
	if len(moved) > 0 {
		return nil, fmt.Errorf("%s: %w: %s", img.ImageID, scan.ErrOtherContent, strings.Join(moved, ", "))
	}
	return nil, fmt.Errorf("%s: %w", img.ImageID, ErrNotFound)
}

func candidates(img handoff.Image) []string {
	out := make([]string, 0, 1+len(img.Names)+len(img.Digests))
	if img.ImageID != "" {
		out = append(out, img.ImageID)
	}
	out = append(out, img.Names...)
	return append(out, img.Digests...)
}

// Image is a containerd image as a go-containerregistry image, plus the
// names Trivy reports it under.
type Image struct {
	v1.Image
	ref handoff.Image
}

// Name is the image's first name, or its ID.
func (i *Image) Name() string {
	if len(i.ref.Names) > 0 {
		return i.ref.Names[0]
	}
	return i.ref.ImageID
}

// ID is the config digest, as the runtime reports it.
func (i *Image) ID() (string, error) {
	h, err := i.ConfigName()
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// RepoTags are the image's tagged names.
func (i *Image) RepoTags() []string { return i.ref.Names }

// RepoDigests are the image's repo@digest names.
func (i *Image) RepoDigests() []string { return i.ref.Digests }

// Wrap gives any go-containerregistry image the names Trivy reports; tests
// and the benchmark use it for images that are not in a runtime.
func Wrap(img v1.Image, ref handoff.Image) *Image { return &Image{Image: img, ref: ref} }

func newImage(ctx context.Context, cs content.Store, m ocispec.Manifest, raw []byte, ref handoff.Image) (*Image, error) {
	cfg, err := content.ReadBlob(ctx, cs, m.Config)
	if err != nil {
		return nil, fmt.Errorf("reading the image config %s: %w", m.Config.Digest, err)
	}
	core := &core{ctx: ctx, cs: cs, manifest: raw, config: cfg, mediaType: types.MediaType(m.MediaType), layers: m.Layers}
	img, err := partial.CompressedToImage(core)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ref.ImageID, err)
	}
	return Wrap(img, ref), nil
}

// resolve follows an index down to the manifest for the node's platform
// that the content store holds (a node pulls only its own platform's), and
// returns that manifest with its own bytes, so the image's digest is the
// registry's.
func resolve(ctx context.Context, cs content.Store, desc ocispec.Descriptor, platform platforms.MatchComparer) (ocispec.Manifest, []byte, error) {
	for range 4 {
		raw, err := content.ReadBlob(ctx, cs, desc)
		if err != nil {
			return ocispec.Manifest{}, nil, fmt.Errorf("reading %s: %w", desc.Digest, err)
		}
		switch desc.MediaType {
		case images.MediaTypeDockerSchema2Manifest, ocispec.MediaTypeImageManifest:
			var m ocispec.Manifest
			if err := json.Unmarshal(raw, &m); err != nil {
				return m, nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
			}
			if m.MediaType == "" {
				m.MediaType = desc.MediaType
			}
			return m, raw, nil
		case images.MediaTypeDockerSchema2ManifestList, ocispec.MediaTypeImageIndex:
			var idx ocispec.Index
			if err := json.Unmarshal(raw, &idx); err != nil {
				return ocispec.Manifest{}, nil, fmt.Errorf("index %s: %w", desc.Digest, err)
			}
			next, ok := choose(ctx, cs, idx.Manifests, platform)
			if !ok {
				return ocispec.Manifest{}, nil, fmt.Errorf("index %s has no manifest for %s in the content store", desc.Digest, platforms.DefaultString())
			}
			desc = next
		default:
			return ocispec.Manifest{}, nil, fmt.Errorf("%s has media type %q, not an image", desc.Digest, desc.MediaType)
		}
	}
	return ocispec.Manifest{}, nil, fmt.Errorf("image index nesting too deep at %s", desc.Digest)
}

func choose(ctx context.Context, cs content.Store, list []ocispec.Descriptor, platform platforms.MatchComparer) (ocispec.Descriptor, bool) {
	var best ocispec.Descriptor
	found := false
	for _, d := range list {
		if d.Platform != nil && !platform.Match(*d.Platform) {
			continue
		}
		if _, err := cs.Info(ctx, d.Digest); err != nil {
			continue
		}
		if !found || (d.Platform != nil && best.Platform != nil && platform.Less(*d.Platform, *best.Platform)) {
			best, found = d, true
		}
	}
	return best, found
}

type core struct {
	ctx       context.Context
	cs        content.Store
	manifest  []byte
	config    []byte
	mediaType types.MediaType
	layers    []ocispec.Descriptor
}

func (c *core) RawConfigFile() ([]byte, error)      { return c.config, nil }
func (c *core) MediaType() (types.MediaType, error) { return c.mediaType, nil }
func (c *core) RawManifest() ([]byte, error)        { return c.manifest, nil }

func (c *core) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range c.layers {
		if d.Digest.String() == h.String() {
			return &layer{ctx: c.ctx, cs: c.cs, desc: d}, nil
		}
	}
	return nil, fmt.Errorf("layer %s is not in the manifest", h)
}

type layer struct {
	ctx  context.Context
	cs   content.Store
	desc ocispec.Descriptor
}

func (l *layer) Digest() (v1.Hash, error)            { return v1.NewHash(l.desc.Digest.String()) }
func (l *layer) Size() (int64, error)                { return l.desc.Size, nil }
func (l *layer) MediaType() (types.MediaType, error) { return types.MediaType(l.desc.MediaType), nil }

// Compressed streams the blob. A layer the runtime discarded after
// unpacking (containerd's discard_unpacked_layers) fails here, and the scan
// of that image fails: it is kept.
func (l *layer) Compressed() (io.ReadCloser, error) {
	ra, err := l.cs.ReaderAt(l.ctx, l.desc)
	if err != nil {
		return nil, fmt.Errorf("layer %s is not in the content store: %w", l.desc.Digest, err)
	}
	// Every ReadAt of a remote content store is a gRPC round trip: read in
	// large chunks, not in the tar and gzip readers' small ones.
	return readCloser{Reader: bufio.NewReaderSize(io.NewSectionReader(ra, 0, ra.Size()), readChunk), Closer: ra}, nil
}

// readChunk is the size of each read from the content store.
const readChunk = 1 << 20

type readCloser struct {
	io.Reader
	io.Closer
}
