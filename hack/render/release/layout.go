// Reading the built image layouts, and pushing them once per digest.

package release

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// readLayout opens the OCI layout hack/ocibuild wrote for im and returns
// its multi-platform index, after checking that it was built for this
// release (its full reference names this registry and version: the manager
// in it defaults its workers to this registry) with every platform.
func readLayout(dir string, im Image, ref, version string) (v1.ImageIndex, error) {
	rebuild := fmt.Sprintf("build it with: make images REGISTRY=%s VERSION=%s", strings.TrimSuffix(ref, "/"+im.Repo+":"+version), version)
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image %s: no OCI layout in %s (%v); %s", im.Name, dir, err, rebuild)
	}
	outer, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Name, err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Name, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("image %s: %s/index.json holds %d entries, want the one index hack/ocibuild writes; %s", im.Name, dir, len(m.Manifests), rebuild)
	}
	d := m.Manifests[0]
	if got := d.Annotations[annotationContainerName]; got != ref || d.Annotations[annotationRefName] != version {
		return nil, fmt.Errorf("image %s: %s was built as %q, not %s; %s", im.Name, dir, got, ref, rebuild)
	}
	if !d.MediaType.IsIndex() {
		return nil, fmt.Errorf("image %s: %s holds a %s, want an image index", im.Name, dir, d.MediaType)
	}
	idx, err := outer.ImageIndex(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Name, err)
	}
	im2, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.Name, err)
	}
	var plats []string
	for _, c := range im2.Manifests {
		if c.Platform != nil {
			plats = append(plats, c.Platform.OS+"/"+c.Platform.Architecture)
		}
	}
	slices.Sort(plats)
	want := slices.Sorted(slices.Values(im.Platforms))
	if !slices.Equal(plats, want) {
		return nil, fmt.Errorf("image %s: %s holds %v, a release needs %v; %s (PLATFORMS unset: every platform)", im.Name, dir, plats, want, rebuild)
	}
	return idx, nil
}

// pushIndex writes idx to tag unless the tag already holds it.
func pushIndex(tag name.Tag, idx v1.ImageIndex, overwrite bool, ropts []remote.Option) (Pushed, error) {
	dig, err := idx.Digest()
	if err != nil {
		return Pushed{}, err
	}
	return pushOnce(tag, dig, overwrite, "build the same commit with the same SOURCE_DATE_EPOCH and toolchain",
		func() error { return remote.WriteIndex(tag, idx, ropts...) }, ropts)
}

// pushOnce writes what has digest dig to tag (write) unless the tag already
// holds it; a tag holding something else is refused unless overwrite: a
// published version does not change. same says how to rebuild identically.
func pushOnce(tag name.Tag, dig v1.Hash, overwrite bool, same string, write func() error, ropts []remote.Option) (Pushed, error) {
	p := Pushed{Ref: tag.String(), Digest: dig.String()}
	desc, err := remote.Head(tag, ropts...)
	switch {
	case err == nil && desc.Digest == dig:
		p.Unchanged = true
		return p, nil
	case err == nil && !overwrite:
		return p, fmt.Errorf("%s already holds %s, not this build's %s: a published version does not change (%s, bump VERSION, or -overwrite)", tag, desc.Digest, dig, same)
	case err != nil && !isNotFound(err):
		return p, fmt.Errorf("looking up %s: %w", tag, err)
	}
	if err := write(); err != nil {
		return p, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return p, nil
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
