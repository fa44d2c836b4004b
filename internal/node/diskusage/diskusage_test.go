package diskusage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Not t.TempDir: this package runs under Wine too, where t.TempDir's
// clean-up can fail the test; here the clean-up is best effort.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "diskusage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestStat(t *testing.T) {
	dir := tempDir(t)
	u, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.Capacity == 0 || u.Available > u.Capacity {
		t.Fatalf("Stat(%s) = %+v: want capacity > 0 and available <= capacity", dir, u)
	}
	if u.Used() != u.Capacity-u.Available {
		t.Errorf("Used() = %d, want %d", u.Used(), u.Capacity-u.Available)
	}
	if p := u.Percent(); p < 0 || p > 100 {
		t.Errorf("Percent() = %v", p)
	}
	// A directory below is on the same filesystem, so it reads the same size.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if v, err := Stat(sub); err != nil || v.Capacity != u.Capacity {
		t.Errorf("Stat(%s) = %+v, %v; want capacity %d", sub, v, err, u.Capacity)
	}
}

func TestStatMissing(t *testing.T) {
	missing := filepath.Join(tempDir(t), "missing")
	_, err := Stat(missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Stat(%s) error = %v; want one naming the path", missing, err)
	}
}

func TestUsageArithmetic(t *testing.T) {
	cases := map[string]struct {
		u       Usage
		used    uint64
		percent float64
	}{
		"empty":          {u: Usage{}, used: 0, percent: 0},
		"full":           {u: Usage{Capacity: 200, Available: 0}, used: 200, percent: 100},
		"85%":            {u: Usage{Capacity: 1000, Available: 150}, used: 850, percent: 85},
		"nothing used":   {u: Usage{Capacity: 1000, Available: 1000}, used: 0, percent: 0},
		"inconsistent":   {u: Usage{Capacity: 10, Available: 20}, used: 0, percent: 0},
		"large (16 TiB)": {u: Usage{Capacity: 1 << 44, Available: 1 << 42}, used: 3 << 42, percent: 75},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.u.Used(); got != tc.used {
				t.Errorf("Used() = %d, want %d", got, tc.used)
			}
			if got := tc.u.Percent(); got != tc.percent {
				t.Errorf("Percent() = %v, want %v", got, tc.percent)
			}
		})
	}
}

// TestSameFilesystem: a directory and one inside it are on one filesystem;
// a path that cannot be read cannot be told.
func TestSameFilesystem(t *testing.T) {
	dir := tempDir(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	type answer struct{ Same, Known bool }
	got := map[string]answer{}
	for name, p := range map[string][2]string{"nested": {dir, sub}, "itself": {dir, dir}, "missing": {dir, filepath.Join(dir, "none")}} {
		same, known := SameFilesystem(p[0], p[1])
		got[name] = answer{same, known}
	}
	want := map[string]answer{"nested": {true, true}, "itself": {true, true}, "missing": {false, false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SameFilesystem (-want +got):\n%s", diff)
	}
}
