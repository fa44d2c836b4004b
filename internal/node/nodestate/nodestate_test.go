package nodestate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tempDir avoids t.TempDir, which misbehaves under Wine.
func tempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "nodestate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestObserveAcrossRuns(t *testing.T) {
	dir := tempDir(t)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s, err := Load(dir)
	if err != nil || !s.New {
		t.Fatalf("Load of no file: %v, new=%v", err, s != nil && s.New)
	}
	ids := []string{"sha256:a", "sha256:b", "sha256:c"}
	s.Observe(t0, ids, func(i int) bool { return i == 0 })
	if err := Save(dir, s); err != nil {
		t.Fatal(err)
	}

	// A day later a is no longer used, b is, c is gone, d arrived.
	t1 := t0.Add(24 * time.Hour)
	s, err = Load(dir)
	if err != nil || s.New {
		t.Fatalf("Load: %v, new=%v", err, s.New)
	}
	s.Observe(t1, []string{"sha256:a", "sha256:b", "sha256:d"}, func(i int) bool { return i == 1 })
	if err := Save(dir, s); err != nil {
		t.Fatal(err)
	}
	s, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Entry{
		"sha256:a": {FirstSeen: t0, LastUsed: t0},
		"sha256:b": {FirstSeen: t0, LastUsed: t1},
		"sha256:c": {},
		"sha256:d": {FirstSeen: t1},
	}
	got := map[string]Entry{}
	for id := range want {
		got[id] = s.Get(id)
	}
	if diff := cmp.Diff(want, got); diff != "" || s.Len() != 3 {
		t.Errorf("state of %d images (-want +got):\n%s", s.Len(), diff)
	}
}

func TestLoadRefusesDamage(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"no header":      "sha256:a 1 0\n",
		"other version":  "eraser-node-state 2\n",
		"missing field":  header + "\nsha256:a 1\n",
		"not a number":   header + "\nsha256:a x 0\n",
		"zero first":     header + "\nsha256:a 0 0\n",
		"negative used":  header + "\nsha256:a 1 -1\n",
		"duplicate":      header + "\nsha256:a 1 0\nsha256:a 2 0\n",
		"over long line": header + "\n" + strings.Repeat("x", 5000) + " 1 0\n",
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := tempDir(t)
			if err := os.WriteFile(Path(dir), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), Path(dir)) {
				t.Fatalf("Load: got %v, want an error naming the file", err)
			}
		})
	}
}

func TestSaveLeavesNoTemporaryFiles(t *testing.T) {
	dir := filepath.Join(tempDir(t), "new", "dir")
	s := NewState()
	s.Observe(time.Unix(5, 0), []string{"sha256:a", "bad id"}, func(int) bool { return false })
	if err := Save(dir, s); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != FileName {
		t.Fatalf("directory holds %v (%v), want only %s", entries, err, FileName)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Get("sha256:a").FirstSeen.IsZero() || got.Len() != 1 {
		t.Errorf("reloaded %d images, want only sha256:a", got.Len())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(header + "\nsha256:a 1 0\n"))
	f.Add([]byte(header + "\nsha256:a 1 2\nsha256:b 3 0"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse(data)
		if err != nil {
			return
		}
		for id := range s.images {
			if e := s.Get(id); id == "" || e.FirstSeen.IsZero() {
				t.Fatalf("accepted entry %q %+v", id, e)
			}
		}
	})
}

// TestObserveKeepsNewerReadings: a reading merged after a newer one (its
// worker waited for the lock) forgets only images nothing saw since.
func TestObserveKeepsNewerReadings(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	cases := map[string]struct {
		before record
		want   Entry
	}{
		"seen only before":        {before: record{first: 50, last: 60}, want: Entry{}},
		"arrived after":           {before: record{first: 150}, want: Entry{FirstSeen: at(150)}},
		"used after":              {before: record{first: 50, last: 150}, want: Entry{FirstSeen: at(50), LastUsed: at(150)}},
		"seen in the same second": {before: record{first: 100}, want: Entry{FirstSeen: at(100)}},
		"used in the same second": {before: record{first: 50, last: 100}, want: Entry{FirstSeen: at(50), LastUsed: at(100)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewState()
			s.images["sha256:other"] = c.before
			s.Observe(at(100), []string{"sha256:mine"}, func(int) bool { return true })
			got := map[string]Entry{"sha256:other": s.Get("sha256:other"), "sha256:mine": s.Get("sha256:mine")}
			want := map[string]Entry{"sha256:other": c.want, "sha256:mine": {FirstSeen: at(100), LastUsed: at(100)}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
