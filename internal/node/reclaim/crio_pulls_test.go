//go:build linux

package reclaim

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPullUnderWay: a pull's directory of blobs is a pull under way
// however long its blob has been held, up to a day with nothing written,
// which a killed CRI-O leaves.
func TestPullUnderWay(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		temps []pullTemp
		want  bool
	}{
		"none":                     {want: false},
		"written a second ago":     {temps: []pullTemp{{Name: "a", LastWrite: now.Add(-time.Second)}}, want: true},
		"held for an hour":         {temps: []pullTemp{{Name: "a", LastWrite: now.Add(-time.Hour)}}, want: true},
		"a killed CRI-O's":         {temps: []pullTemp{{Name: "a", LastWrite: now.Add(-25 * time.Hour)}}, want: false},
		"one stale, one under way": {temps: []pullTemp{{Name: "a", LastWrite: now.Add(-48 * time.Hour)}, {Name: "b", LastWrite: now}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := pullUnderWay(tc.temps, now) != ""; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadPullTemps: containers/image's pull directories, each with its
// newest write (a blob file's); other entries are not pulls; a directory
// the worker cannot see is an error.
func TestReadPullTemps(t *testing.T) {
	dir := t.TempDir()
	pull := filepath.Join(dir, "container_images_storage123")
	if err := os.MkdirAll(pull, 0o700); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(pull, "1")
	if err := os.WriteFile(blob, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirTime, blobTime := time.Unix(1000, 0), time.Unix(2000, 0)
	if err := os.Chtimes(blob, blobTime, blobTime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(pull, dirTime, dirTime); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"container_images_other", "systemd-private-x"} {
		if err := os.Mkdir(filepath.Join(dir, other), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "container_images_storage_file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readPullTemps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]pullTemp{{Name: pull, LastWrite: blobTime}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := readPullTemps(filepath.Join(dir, "missing")); err == nil {
		t.Error("a directory not there: no error")
	}
}
