package gobuild

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBuildsOnce builds a small command of the repository once, whatever
// the number of callers, into a directory that Remove deletes.
func TestBuildsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a command")
	}
	c := New("test/images/pause")
	path := c.Path(t)
	if filepath.Base(path) != "pause" {
		t.Errorf("path %s, want the package's directory name", path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if again := c.Path(t); again != path {
		t.Errorf("second Path %s, want %s", again, path)
	}
	c.Remove()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("directory left after Remove: %v", err)
	}
}
