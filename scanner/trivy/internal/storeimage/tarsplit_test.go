package storeimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
)

// layerFile is one entry of a test layer.
type layerFile struct {
	name, content, link string
	typ                 byte
}

// writeLayer stores a layer as containers/storage's overlay driver does:
// its files under overlay/<id>/diff and the tar's headers and padding in
// overlay-layers/<id>.tar-split.gz. It returns the layer record and the
// original tar.
func writeLayer(t testing.TB, root, id string, files []layerFile) (criorecords.Layer, []byte) {
	t.Helper()
	diff := filepath.Join(root, "overlay", id, "diff")
	if err := os.MkdirAll(diff, 0o755); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	var split bytes.Buffer
	enc := json.NewEncoder(&split)
	mark := 0
	segment := func() {
		if stream.Len() > mark {
			if err := enc.Encode(splitEntry{Type: splitSegment, Payload: bytes.Clone(stream.Bytes()[mark:])}); err != nil {
				t.Fatal(err)
			}
		}
		mark = stream.Len()
	}
	tw := tar.NewWriter(&stream)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Typeflag: f.typ, Mode: 0o644, Size: int64(len(f.content)), Linkname: f.link}
		if f.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		// The header is written at once; the previous entry's padding
		// before it: both are tar bytes of the record.
		segment()
		if f.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(f.content)); err != nil {
				t.Fatal(err)
			}
			mark = stream.Len()
			if err := enc.Encode(splitEntry{Type: splitFile, Name: f.name, Size: int64(len(f.content))}); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(diff, f.name)
		switch f.typ {
		case tar.TypeDir:
			err := os.MkdirAll(p, 0o755)
			check(t, err)
		case tar.TypeReg:
			check(t, os.MkdirAll(filepath.Dir(p), 0o755))
			check(t, os.WriteFile(p, []byte(f.content), 0o644))
		case tar.TypeSymlink:
			check(t, os.MkdirAll(filepath.Dir(p), 0o755))
			check(t, os.Symlink(f.link, p))
		}
	}
	check(t, tw.Close())
	segment()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(split.Bytes())
	check(t, err)
	check(t, zw.Close())
	check(t, os.MkdirAll(filepath.Join(root, "overlay-layers"), 0o755))
	check(t, os.WriteFile(filepath.Join(root, "overlay-layers", id+".tar-split.gz"), gz.Bytes(), 0o644))
	sum := sha256.Sum256(stream.Bytes())
	return criorecords.Layer{ID: id, DiffDigest: "sha256:" + hex.EncodeToString(sum[:]), DiffBytes: int64(stream.Len())}, stream.Bytes()
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayerTar: a stored layer is rebuilt byte for byte, whiteouts and
// opaque markers included, and any change to its files on the node, or a
// path out of its directory, ends the read in an error, never in io.EOF.
func TestLayerTar(t *testing.T) {
	base := []layerFile{
		{name: "etc/", typ: tar.TypeDir},
		{name: "etc/os-release", content: "ID=alpine\n", typ: tar.TypeReg},
		{name: "etc/.wh.removed", content: "", typ: tar.TypeReg},
		{name: "var/lib/.wh..wh..opq", content: "", typ: tar.TypeReg},
		{name: "bin/sh", link: "/bin/busybox", typ: tar.TypeSymlink},
		{name: "lib/apk/db/installed", content: strings.Repeat("P:musl\nV:1.2.4-r2\n\n", 200), typ: tar.TypeReg},
	}
	cases := map[string]struct {
		files  []layerFile
		change func(t *testing.T, diff string)
		// wantErr is part of the error the read ends in ("" for none).
		wantErr string
	}{
		"rebuilt as pulled": {files: base},
		"empty layer":       {},
		"a file's content changed": {files: base, wantErr: "not its diff ID", change: func(t *testing.T, diff string) {
			check(t, os.WriteFile(filepath.Join(diff, "etc/os-release"), []byte("ID=debian\n"), 0o644))
		}},
		"a file shortened": {files: base, wantErr: "not the size its tar header says", change: func(t *testing.T, diff string) {
			check(t, os.WriteFile(filepath.Join(diff, "etc/os-release"), []byte("ID="), 0o644))
		}},
		"a file grown": {files: base, wantErr: "not the size its tar header says", change: func(t *testing.T, diff string) {
			check(t, os.WriteFile(filepath.Join(diff, "etc/os-release"), []byte("ID=alpine\nX=1\n"), 0o644))
		}},
		"a file removed": {files: base, wantErr: "os-release", change: func(t *testing.T, diff string) {
			check(t, os.Remove(filepath.Join(diff, "etc/os-release")))
		}},
		// The directory became a link out of the layer after the pull: the
		// read stops at it instead of reading the node's own files.
		"a directory swapped for a link out of the layer": {files: base, wantErr: "path escapes", change: func(t *testing.T, diff string) {
			check(t, os.RemoveAll(filepath.Join(diff, "etc")))
			check(t, os.Symlink("/etc", filepath.Join(diff, "etc")))
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			l, want := writeLayer(t, root, "l1", tc.files)
			if tc.change != nil {
				tc.change(t, filepath.Join(root, "overlay", "l1", "diff"))
			}
			rc, err := layerTar(root, "overlay", l)
			check(t, err)
			defer rc.Close()
			got, err := io.ReadAll(rc)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("read: %v", err)
			case tc.wantErr == "" && !bytes.Equal(got, want):
				t.Errorf("rebuilt %d bytes, not the %d of the pulled tar", len(got), len(want))
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("read ended with %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestLayerTarRefuses: records that cannot be read safely are refused
// before any read.
func TestLayerTarRefuses(t *testing.T) {
	root := t.TempDir()
	l, _ := writeLayer(t, root, "l1", []layerFile{{name: "a", content: "x", typ: tar.TypeReg}})
	cases := map[string]struct {
		driver string
		layer  criorecords.Layer
		want   string
	}{
		"no diff digest":    {driver: "overlay", layer: criorecords.Layer{ID: "l1"}, want: "no sha256 diff digest"},
		"an ID with a path": {driver: "overlay", layer: criorecords.Layer{ID: "../l1", DiffDigest: l.DiffDigest}, want: "not a store ID"},
		"no tar-split":      {driver: "overlay", layer: criorecords.Layer{ID: "l2", DiffDigest: l.DiffDigest}, want: "l2"},
		"another driver":    {driver: "btrfs", layer: l, want: "overlay and vfs drivers only"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "no tar-split" {
				check(t, os.MkdirAll(filepath.Join(root, "overlay", "l2", "diff"), 0o755))
			}
			rc, err := layerTar(root, tc.driver, tc.layer)
			if err == nil {
				rc.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// FuzzLayerTar: whatever the tar-split record holds, the rebuild ends in
// an error or in exactly the layer's digest, and reads nothing outside the
// layer's directory: a file beside it, of bytes drawn for each input (which
// no input can spell), never appears in the output.
func FuzzLayerTar(f *testing.F) {
	f.Add([]byte(`{"type":2,"payload":"aGVsbG8="}` + "\n" + `{"type":1,"name":"a","size":1}` + "\n"))
	f.Add([]byte(`{"type":1,"name":"../secret","size":32}` + "\n"))
	f.Add([]byte(`{"type":1,"name":"/link/secret","size":32}` + "\n"))
	f.Add([]byte(`{"type":3}`))
	f.Fuzz(func(t *testing.T, split []byte) {
		root := t.TempDir()
		diff := filepath.Join(root, "overlay", "l1", "diff")
		check(t, os.MkdirAll(diff, 0o755))
		check(t, os.WriteFile(filepath.Join(diff, "a"), []byte("x"), 0o644))
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		check(t, os.WriteFile(filepath.Join(root, "overlay", "l1", "secret"), secret, 0o644))
		check(t, os.Symlink("..", filepath.Join(diff, "link")))
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(split)
		check(t, zw.Close())
		check(t, os.MkdirAll(filepath.Join(root, "overlay-layers"), 0o755))
		check(t, os.WriteFile(filepath.Join(root, "overlay-layers", "l1.tar-split.gz"), gz.Bytes(), 0o644))
		rc, err := layerTar(root, "overlay", criorecords.Layer{ID: "l1", DiffDigest: "sha256:" + strings.Repeat("0", 64)})
		check(t, err)
		defer rc.Close()
		got, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
		if bytes.Contains(got, secret) {
			t.Fatalf("read a file outside the layer: %q", got)
		}
	})
}
