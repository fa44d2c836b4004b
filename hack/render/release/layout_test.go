package release

// The built image layouts: the ones a release refuses, a subset of the
// platforms, and the indexes it pushes.

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// writeLayouts writes, for every image of Images, an OCI layout shaped as
// hack/ocibuild writes it (index.json -> one annotated multi-platform
// index) with a tiny image per platform, named for registry and version.
// It returns the indexes' digests. With only, just those platforms (as
// make images PLATFORMS=... writes them).
func writeLayouts(t *testing.T, dir, registry, version string, only ...string) map[string]v1.Hash {
	t.Helper()
	digests := map[string]v1.Hash{}
	for _, im := range Images {
		var adds []mutate.IndexAddendum
		for _, p := range im.Platforms {
			if len(only) > 0 && !slices.Contains(only, p) {
				continue
			}
			goos, goarch, _ := strings.Cut(p, "/")
			layer := static.NewLayer([]byte(im.Name+" for "+p), types.OCILayer)
			img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cf = cf.DeepCopy()
			cf.OS, cf.Architecture = goos, goarch
			if img, err = mutate.ConfigFile(img, cf); err != nil {
				t.Fatal(err)
			}
			adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: goarch}}})
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
		lp, err := layout.Write(filepath.Join(dir, im.Name), empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			annotationRefName:       version,
			annotationContainerName: ImageRef(registry, im.Repo, version),
		})); err != nil {
			t.Fatal(err)
		}
		if digests[im.Name], err = idx.Digest(); err != nil {
			t.Fatal(err)
		}
	}
	return digests
}

// checkRemoteIndex reads ref back from the registry: one index of the
// given digest whose manifests are the platforms, each pullable.
func checkRemoteIndex(t *testing.T, ref string, digest v1.Hash, platforms []string) {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(tag)
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	if got, _ := idx.Digest(); got != digest {
		t.Errorf("%s: index %s, want %s", ref, got, digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		if _, err := remote.Image(tag.Digest(d.Digest.String())); err != nil {
			t.Errorf("%s %s: %v", ref, d.Platform, err)
		}
	}
	if !slices.Equal(got, platforms) {
		t.Errorf("%s: platforms %v, want %v", ref, got, platforms)
	}
}

// Layouts built for another registry or version, or without every
// platform, are refused before anything is pushed.
func TestReleaseRefusesOtherBuilds(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	cases := map[string]func(dir string){
		"other registry": func(dir string) { writeLayouts(t, dir, "example.test/eraser", testVersion) },
		"other version":  func(dir string) { writeLayouts(t, dir, reg, "1.0.0") },
		"missing": func(dir string) {
			writeLayouts(t, dir, reg, testVersion)
			if err := os.RemoveAll(filepath.Join(dir, "remover")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, write := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(dir)
			_, err := Run(context.Background(), options(t, reg, dir, helmConfig))
			if err == nil || !strings.Contains(err.Error(), "make images REGISTRY="+reg+" VERSION="+testVersion) {
				t.Errorf("got %v, want a refusal that says how to build", err)
			}
		})
	}
	// A chart that does not package stops the release before any push.
	t.Run("no chart", func(t *testing.T) {
		dir := t.TempDir()
		writeLayouts(t, dir, reg, testVersion)
		o := options(t, reg, dir, helmConfig)
		o.ChartDir = filepath.Join(dir, "no-chart")
		if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "loading chart") {
			t.Errorf("got %v, want the chart's error", err)
		}
	})
	// Nothing reached the registry.
	repo, _ := name.NewRepository(reg+"/remover", name.Insecure)
	if tags, err := remote.List(repo); err == nil && len(tags) > 0 {
		t.Errorf("refused releases pushed %v", tags)
	}
}

// A partial release (-platforms, for tests and local use) pushes each
// index with the listed platforms, and refuses layouts that hold more or
// fewer; without -platforms, the same layouts are refused.
func TestReleasePlatformSubset(t *testing.T) {
	helmConfig := isolate(t)
	reg := startRegistry(t)
	images := t.TempDir()
	digests := writeLayouts(t, images, reg, testVersion, "linux/amd64")
	o := options(t, reg, images, helmConfig)
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "a release needs") {
		t.Fatalf("a linux/amd64-only build released as a full release: %v", err)
	}
	o.Platforms = []string{"linux/amd64", "linux/arm64"}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "a release needs") {
		t.Fatalf("a linux/amd64-only build released for linux/arm64 too: %v", err)
	}
	o.Platforms = []string{"linux/amd64"}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for i, im := range Images {
		p := res.Images[i]
		want := ImageRef(reg, im.Repo, testVersion)
		if p.Ref != want || p.Digest != digests[im.Name].String() || !slices.Equal(p.Platforms, []string{"linux/amd64"}) {
			t.Errorf("image %s: pushed %+v, want %s@%s for linux/amd64", im.Name, p, want, digests[im.Name])
		}
		checkRemoteIndex(t, want, digests[im.Name], []string{"linux/amd64"})
	}
}
