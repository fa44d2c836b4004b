package storeimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/handoff"
)

// TestOpenReadsEveryLayerRecord: the scanner finds an image's layers in
// the store's records as criorecords reads them, volatile-layers.json
// included, so it sees the layers the leftovers and the bytes freed are
// judged on; a layer in no records file fails the image's scan.
func TestOpenReadsEveryLayerRecord(t *testing.T) {
	record := func(l criorecords.Layer, parent string) map[string]any {
		return map[string]any{"id": l.ID, "parent": parent, "diff-digest": l.DiffDigest, "diff-size": l.DiffBytes}
	}
	for name, tc := range map[string]struct {
		// stable and volatile are the layers ("base", "top") each file
		// records.
		stable, volatile []string
		wantErr          string
	}{
		"every layer in layers.json":            {stable: []string{"base", "top"}},
		"the top layer only in volatile-layers": {stable: []string{"base"}, volatile: []string{"top"}},
		"every layer only in volatile-layers":   {volatile: []string{"base", "top"}},
		"the top layer in no records":           {stable: []string{"base"}, wantErr: "layer l-top is not in the store's layer records"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			base, baseTar := writeLayer(t, root, "l-base", []layerFile{{name: "etc/os-release", content: "ID=alpine\n", typ: tar.TypeReg}})
			top, topTar := writeLayer(t, root, "l-top", []layerFile{{name: "app", content: "binary", typ: tar.TypeReg}})
			records := map[string]map[string]any{"base": record(base, ""), "top": record(top, base.ID)}
			files := map[string][]map[string]any{}
			for file, ls := range map[string][]string{"layers.json": tc.stable, "volatile-layers.json": tc.volatile} {
				for _, l := range ls {
					files[file] = append(files[file], records[l])
				}
			}
			for file, recs := range files {
				writeJSON(t, filepath.Join(root, "overlay-layers", file), recs)
			}
			id := writeImage(t, root, "example.com/volatile:1", "l-top", base.DiffDigest, top.DiffDigest)

			s, err := Open(root)
			check(t, err)
			img, err := s.Open(context.Background(), handoff.Image{ImageID: "sha256:" + id})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			check(t, err)
			layers, err := img.Layers()
			check(t, err)
			var got [][]byte
			for _, l := range layers {
				rc, err := l.Uncompressed()
				check(t, err)
				data, err := io.ReadAll(rc)
				check(t, err)
				check(t, rc.Close())
				got = append(got, data)
			}
			if diff := cmp.Diff([][]byte{baseTar, topTar}, got); diff != "" {
				t.Errorf("layer tars (-want +got):\n%s", diff)
			}
		})
	}
}

// writeImage stores an image record and its config, whose diff IDs are
// diffIDs, and returns the image's ID.
func writeImage(t *testing.T, root, name, topLayer string, diffIDs ...string) string {
	t.Helper()
	cfg := v1.ConfigFile{OS: "linux", Architecture: "amd64", RootFS: v1.RootFS{Type: "layers"}}
	for _, d := range diffIDs {
		h, err := v1.NewHash(d)
		check(t, err)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, h)
	}
	raw, err := json.Marshal(cfg)
	check(t, err)
	sum := sha256.Sum256(raw)
	id := hex.EncodeToString(sum[:])
	key := "sha256:" + id
	writeJSON(t, filepath.Join(root, "overlay-images", "images.json"),
		[]map[string]any{{"id": id, "names": []string{name}, "layer": topLayer, "big-data-names": []string{key}}})
	check(t, os.MkdirAll(filepath.Join(root, "overlay-images", id), 0o755))
	check(t, os.WriteFile(filepath.Join(root, "overlay-images", id, bigDataFile(key)), raw, 0o644))
	return id
}

func writeJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	check(t, err)
	check(t, os.MkdirAll(filepath.Dir(file), 0o755))
	check(t, os.WriteFile(file, data, 0o644))
}
