//go:build linux

package criorecords_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// TestTimesOnCRIO: on a real CRI-O, every image pulled has its pull time,
// by ID and by name, within the pull's window; its build time (2024) is not
// taken for it.
func TestTimesOnCRIO(t *testing.T) {
	testcrio.Require(t)
	c := testcrio.Start(t)
	before := time.Now().Add(-time.Second)
	const app = "example.com/age/app:1"
	c.Import(t, testimage.Image{Tags: []string{app}, RandomBytes: 1 << 10})
	after := time.Now().Add(time.Second)
	times, err := criorecords.Times(c.RootDir())
	if err != nil {
		t.Fatal(err)
	}
	id := c.ImageIDs(t)[app]
	for _, key := range []string{id, app} {
		got, ok := times[key]
		if !ok || got.Before(before) || got.After(after) {
			t.Errorf("time of %s: %v (found %v), want within the pull, %v to %v", key, got, ok, before, after)
		}
	}
	if _, err := criorecords.Times(t.TempDir()); err == nil {
		t.Error("a directory without records: no error")
	}
}

// TestTimesFromTheStoreRecords: the times are those of the store's image
// records as criorecords reads them, the one parser of images.json.
func TestTimesFromTheStoreRecords(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "overlay", `[{"id":"aa","names":["a:1"],"created":"2026-11-01T00:00:00Z"},{"id":"bb","names":["b:1"]}]`)
	images, err := criorecords.Images(dir, "overlay")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{}
	for _, img := range images {
		if !img.Created.IsZero() {
			for _, k := range append([]string{img.ID}, img.Names...) {
				want[k] = img.Created
			}
		}
	}
	got, err := criorecords.Times(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-Images +Times):\n%s", diff)
	}
}

func write(t *testing.T, dir, driver, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, driver+"-images"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, driver+"-images", "images.json"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTimes(t *testing.T) {
	t1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	for name, tc := range map[string]struct {
		records string
		// more are other drivers' records in the same root.
		more    map[string]string
		want    map[string]time.Time
		wantErr bool
		noStore bool
	}{
		"by ID and names": {
			records: `[{"id":"aa","names":["example.com/a:1"],"created":"2026-11-01T00:00:00Z","layer":"x"}]`,
			want:    map[string]time.Time{"aa": t1, "example.com/a:1": t1},
		},
		"a name on two records: the newer": {
			records: `[{"id":"aa","names":["x:1"],"created":"2026-11-01T00:00:00Z"},{"id":"bb","names":["x:1"],"created":"2026-11-01T01:00:00Z"}]`,
			want:    map[string]time.Time{"aa": t1, "bb": t2, "x:1": t2},
		},
		"no time, no ID: left out": {
			records: `[{"id":"aa","names":["a:1"]},{"names":["b:1"],"created":"2026-11-01T00:00:00Z"}]`,
			want:    map[string]time.Time{},
		},
		"not records":             {records: `{"id":"aa"}`, wantErr: true},
		"a time that is not one":  {records: `[{"id":"aa","created":"yesterday"}]`, wantErr: true},
		"an empty file: no times": {records: ``, want: map[string]time.Time{}},
		"two drivers' records: the times of both, the newer of a name": {
			records: `[{"id":"aa","names":["x:1"],"created":"2026-11-01T00:00:00Z"}]`,
			more:    map[string]string{"vfs": `[{"id":"bb","names":["x:1"],"created":"2026-11-01T01:00:00Z"}]`},
			want:    map[string]time.Time{"aa": t1, "bb": t2, "x:1": t2},
		},
		"another driver's records not records": {
			records: `[]`, more: map[string]string{"vfs": `[1]`}, wantErr: true,
		},
		"no records": {noStore: true, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if !tc.noStore {
				write(t, dir, "overlay", tc.records)
			}
			for driver, records := range tc.more {
				write(t, dir, driver, records)
			}
			got, err := criorecords.Times(dir)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if tc.noStore && !errors.Is(err, criorecords.ErrNoStore) {
				t.Errorf("error %v, want ErrNoStore", err)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("times (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimesBound: records past the bound are refused, not read.
func TestTimesBound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "overlay", `[]`)
	// Sparse: 64 MiB and a byte, no disk.
	if err := os.Truncate(filepath.Join(dir, "overlay-images", "images.json"), 64<<20+1); err != nil {
		t.Fatal(err)
	}
	if _, err := criorecords.Times(dir); err == nil || !strings.Contains(err.Error(), "over 64 MiB") {
		t.Errorf("records past the bound: %v, want refused", err)
	}
}

func FuzzTimes(f *testing.F) {
	f.Add(`[{"id":"aa","names":["a:1"],"created":"2026-11-01T00:00:00Z"}]`)
	f.Add(`[{"id":"","created":"bad"}]`)
	f.Fuzz(func(t *testing.T, records string) {
		dir := t.TempDir()
		write(t, dir, "overlay", records)
		times, err := criorecords.Times(dir)
		if err == nil {
			for key, at := range times {
				if key == "" || at.IsZero() {
					t.Fatalf("record %q at %v", key, at)
				}
			}
		}
	})
}
