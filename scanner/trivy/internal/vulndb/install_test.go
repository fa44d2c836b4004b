package vulndb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type entry struct {
	name, body string
	kind       byte
}

func archive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		kind := e.kind
		if kind == 0 {
			kind = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: kind}
		if kind == tar.TypeSymlink {
			h.Size, h.Linkname = 0, e.body
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if kind == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestInstall: only trivy.db and metadata.json are taken from an archive,
// by their base names; an archive without them, or not an archive, is
// refused.
func TestInstall(t *testing.T) {
	for name, tc := range map[string]struct {
		archive func(*testing.T) []byte
		want    map[string]string // files in the DB directory
		wantErr string
	}{
		"a DB archive": {
			archive: func(t *testing.T) []byte {
				return archive(t, entry{name: "trivy.db", body: "bolt"}, entry{name: "metadata.json", body: "{}"})
			},
			want: map[string]string{"trivy.db": "bolt", "metadata.json": "{}"},
		},
		"paths outside the directory are ignored": {
			archive: func(t *testing.T) []byte {
				return archive(t, entry{name: "../../etc/trivy.db", body: "x"}, entry{name: "/abs", body: "x"},
					entry{name: "trivy.db", body: "bolt"}, entry{name: "metadata.json", body: "{}"},
					entry{name: "link", body: "/etc/passwd", kind: tar.TypeSymlink})
			},
			want: map[string]string{"trivy.db": "bolt", "metadata.json": "{}"},
		},
		"no metadata": {
			archive: func(t *testing.T) []byte { return archive(t, entry{name: "trivy.db", body: "bolt"}) },
			wantErr: "lacks trivy.db or metadata.json",
		},
		"not gzip": {
			archive: func(*testing.T) []byte { return []byte("plain text") },
			wantErr: "the DB archive:",
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := Options{CacheDir: t.TempDir()}
			dir, err := Install(bytes.NewReader(tc.archive(t)), o)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			entries, _ := os.ReadDir(dir)
			names := []string{}
			for _, e := range entries {
				names = append(names, e.Name())
				b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
				got[e.Name()] = string(b)
			}
			sort.Strings(names)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("files %v (-want +got):\n%s", names, diff)
			}
			if _, err := os.Stat(filepath.Join(o.CacheDir, "..", "etc")); err == nil {
				t.Error("wrote outside the cache")
			}
		})
	}
}
