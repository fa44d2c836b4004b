// Package testimage builds the images tests put on a runtime, in memory
// (go-containerregistry): files, an entrypoint, random bytes for a size of
// their own, a shared base layer; and the pause binary those images run.
package testimage

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// SandboxImage is the pause image every runtime's test instance is
// configured with, so that a test expects the same on each.
const SandboxImage = "registry.k8s.io/pause:3.10"

var (
	pauseOnce sync.Once
	pauseBin  []byte
	pauseErr  error
)

// Pause is a static binary that sleeps until signalled, for test images.
func Pause(t testing.TB) []byte {
	t.Helper()
	pauseOnce.Do(func() {
		// Built for Linux, whatever the host: the images run on Linux
		// runtimes. Read into memory and removed, as no TestMain owns it.
		c := gobuild.New("test/images/pause").For("linux", runtime.GOARCH)
		dir, err := c.Build()
		if err != nil {
			pauseErr = err
			return
		}
		defer c.Remove()
		pauseBin, pauseErr = os.ReadFile(filepath.Join(dir, "pause"))
	})
	if pauseErr != nil {
		t.Fatal(pauseErr)
	}
	return pauseBin
}

// Image describes a test image to build.
type Image struct {
	// Tags name the image; the first is its primary reference.
	Tags []string
	// Files are added at their paths, mode 0755.
	Files map[string][]byte
	// Entrypoint is the image's entrypoint.
	Entrypoint []string
	// RandomBytes adds a layer of that many random bytes, so that every
	// image gets its own ID and a size.
	RandomBytes int
	// Base is a first layer under the image's own, of these files: images
	// with the same Base share that layer, as images of one base image do.
	Base map[string][]byte
}

// Build builds the image in memory.
func (img Image) Build() (v1.Image, error) {
	base := empty.Image
	if len(img.Base) > 0 {
		b, err := filesTar(img.Base)
		if err != nil {
			return nil, err
		}
		layer, err := Layer(b)
		if err != nil {
			return nil, err
		}
		if base, err = mutate.AppendLayers(base, layer); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := writeFiles(tw, img.Files); err != nil {
		return nil, err
	}
	if img.RandomBytes > 0 {
		data := make([]byte, img.RandomBytes)
		_, _ = rand.Read(data)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "random.bin", Mode: 0o644, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := Layer(buf.Bytes())
	if err != nil {
		return nil, err
	}
	out, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = img.Entrypoint
	return mutate.ConfigFile(out, cf)
}

// writeFiles writes files in their paths' order, so that the same files
// make the same layer and image ID on every build (on every node of a
// test).
func writeFiles(tw *tar.Writer, files map[string][]byte) error {
	for _, path := range slices.Sorted(maps.Keys(files)) {
		data := files[path]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return nil
}

func filesTar(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := writeFiles(tw, files); err != nil {
		return nil, err
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// Layer is a layer of the tar archive b, read from memory: tarball's
// LayerFromReader buffers into a temporary file it never removes (every
// image the tests built left a file in /tmp, 1.8 GB over a CI run).
func Layer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// WriteArchive writes the images into one docker-archive tarball, which
// "ctr images import" loads in one go.
func WriteArchive(path string, images []Image) error {
	refs := map[name.Reference]v1.Image{}
	for _, img := range images {
		built, err := img.Build()
		if err != nil {
			return err
		}
		for _, t := range img.Tags {
			tag, err := name.NewTag(t)
			if err != nil {
				return fmt.Errorf("tag %q: %w", t, err)
			}
			refs[tag] = built
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
