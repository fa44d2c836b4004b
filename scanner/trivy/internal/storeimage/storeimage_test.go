//go:build linux

package storeimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/ctrdimage"
	"github.com/eraser-oss/eraser/scanner/trivy/internal/storeimage"
)

// TestOpenOnCRIO: an image pulled by a real CRI-O is read from its image
// store as the registry served it: the same config (so the same image ID),
// the same diff IDs, and each layer's tar rebuilt byte for byte, a whiteout
// in the upper layer included, which is what makes a package deleted by a
// later layer absent from the scan.
func TestOpenOnCRIO(t *testing.T) {
	testcrio.Require(t)
	c := testcrio.Start(t)
	const name = "example.com/store/two-layers:1"
	base, err := testimage.Image{Files: map[string][]byte{"lib/apk/db/installed": []byte("P:musl\nV:1.2.4-r2\n\n"), "etc/alpine-release": []byte("3.22.1\n")}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	upper := tarLayer(t, map[string]string{"lib/apk/db/.wh.installed": "", "etc/motd": "hello\n"})
	pushed, err := mutate.AppendLayers(base, upper)
	if err != nil {
		t.Fatal(err)
	}
	c.ImportImages(t, testcrio.Tagged{Image: pushed, Tags: []string{name}})
	id := c.ImageIDs(t)[name]

	s, err := storeimage.Open(c.RootDir())
	if err != nil {
		t.Fatal(err)
	}
	for lookup, ref := range map[string]handoff.Image{
		"by bare ID":          {ImageID: id},
		"by sha256: ID":       {ImageID: "sha256:" + id},
		"by name":             {Names: []string{"docker.io/other:1", name}},
		"by name, another ID": {ImageID: "0000", Names: []string{name}},
	} {
		t.Run(lookup, func(t *testing.T) {
			img, err := s.Open(context.Background(), ref)
			if err != nil {
				t.Fatal(err)
			}
			same(t, pushed, img)
		})
	}
	if _, err := s.Open(context.Background(), handoff.Image{ImageID: "feedface", Names: []string{"example.com/absent:1"}}); !errors.Is(err, ctrdimage.ErrNotFound) {
		t.Errorf("an image not in the store: %v, want ErrNotFound", err)
	}
	// The image listed was removed and its name pulled again as this
	// other content: the name leads to another image than the ID names,
	// whose content is not opened in its stead.
	removed := strings.Repeat("e", 64)
	for lookup, ref := range map[string]handoff.Image{
		"bare ID":    {ImageID: removed, Names: []string{name}},
		"sha256: ID": {ImageID: "sha256:" + removed, Names: []string{"example.com/absent:1", name}},
	} {
		if img, err := s.Open(context.Background(), ref); !errors.Is(err, scan.ErrOtherContent) {
			var got v1.Hash
			if img != nil {
				got, _ = img.ConfigName()
			}
			t.Errorf("%s: a name that moved to other content: opened %v (%v), want ErrOtherContent", lookup, got, err)
		}
	}
}

func same(t *testing.T, want v1.Image, got *ctrdimage.Image) {
	t.Helper()
	wantID, _ := want.ConfigName()
	if gotID, err := got.ConfigName(); err != nil || gotID != wantID {
		t.Errorf("config %v (%v), want %v", gotID, err, wantID)
	}
	wantLayers, _ := want.Layers()
	gotLayers, err := got.Layers()
	if err != nil || len(gotLayers) != len(wantLayers) {
		t.Fatalf("%d layers (%v), want %d", len(gotLayers), err, len(wantLayers))
	}
	for i := range wantLayers {
		wantTar := read(t, wantLayers[i])
		gotTar := read(t, gotLayers[i])
		if !bytes.Equal(wantTar, gotTar) {
			t.Errorf("layer %d: rebuilt %d bytes, not the pushed %d", i, len(gotTar), len(wantTar))
		}
		wantDiff, _ := wantLayers[i].DiffID()
		if gotDiff, _ := gotLayers[i].DiffID(); gotDiff != wantDiff {
			t.Errorf("layer %d: diff ID %v, want %v", i, gotDiff, wantDiff)
		}
		if i == 1 && !slices.Contains(names(t, gotTar), "lib/apk/db/.wh.installed") {
			t.Errorf("the upper layer lost its whiteout: %v", names(t, gotTar))
		}
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantCfg, _ := want.ConfigFile()
	if diff := cmp.Diff(wantCfg.RootFS.DiffIDs, cfg.RootFS.DiffIDs); diff != "" {
		t.Errorf("diff IDs (-pushed +read):\n%s", diff)
	}
}

func read(t *testing.T, l v1.Layer) []byte {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func names(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name)
	}
}

func tarLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := tw.WriteHeader(&tar.Header{Name: k, Mode: 0o644, Size: int64(len(files[k])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[k])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := testimage.Layer(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return l
}
