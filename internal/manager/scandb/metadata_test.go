package scandb

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// dbArchive is a gzipped tar of the given files, in order.
func dbArchive(t testing.TB, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
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

const trivyMetadata = `{"Version":2,"NextUpdate":"2026-12-05T12:00:00Z","UpdatedAt":"2026-12-05T06:00:00Z","DownloadedAt":"0001-01-01T00:00:00Z"}`

func TestReadMetadata(t *testing.T) {
	built := time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)
	type result struct {
		Meta Metadata
		Err  string
	}
	cases := map[string]struct {
		archive []byte
		want    result
	}{
		"trivy.db first":         {archive: dbArchive(t, [2]string{"trivy.db", "bolt"}, [2]string{"metadata.json", trivyMetadata}), want: result{Meta: Metadata{Version: 2, UpdatedAt: built}}},
		"metadata first, ./name": {archive: dbArchive(t, [2]string{"./metadata.json", trivyMetadata}, [2]string{"trivy.db", "bolt"}), want: result{Meta: Metadata{Version: 2, UpdatedAt: built}}},
		"no metadata":            {archive: dbArchive(t, [2]string{"trivy.db", "bolt"}), want: result{Err: "no metadata.json"}},
		"not JSON":               {archive: dbArchive(t, [2]string{"metadata.json", "version 2"}), want: result{Err: "metadata.json"}},
		"no schema":              {archive: dbArchive(t, [2]string{"metadata.json", `{"UpdatedAt":"2026-12-05T06:00:00Z"}`}), want: result{Err: "no schema version"}},
		"too large":              {archive: dbArchive(t, [2]string{"metadata.json", strings.Repeat(" ", maxMetadata+1) + "{}"}), want: result{Err: "more than"}},
		"not gzip":               {archive: []byte("a DB archive"), want: result{Err: "the DB archive"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := ReadMetadata(bytes.NewReader(tc.archive))
			got := result{Meta: m}
			if err != nil {
				got.Err = tc.want.Err
				if !strings.Contains(err.Error(), tc.want.Err) || tc.want.Err == "" {
					got.Err = err.Error()
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadMetadata: an archive from the DB's repository never panics the
// reader, and what it accepts names a schema.
func FuzzReadMetadata(f *testing.F) {
	f.Add(dbArchive(f, [2]string{"trivy.db", "bolt"}, [2]string{"metadata.json", trivyMetadata}))
	f.Add(dbArchive(f, [2]string{"metadata.json", `{"Version":0}`}))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadMetadata(bytes.NewReader(b))
		if err == nil && m.Version <= 0 {
			t.Fatalf("accepted metadata without a schema: %+v", m)
		}
	})
}
