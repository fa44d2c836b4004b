package testimage

import (
	"os"
	"testing"
)

// TestBuildLeavesNothingBehind: building an image (every test that seeds a
// runtime does, many times) writes no temporary file.
func TestBuildLeavesNothingBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	img, err := Image{Tags: []string{"e2e/tmp:1"}, Files: map[string][]byte{"pause": []byte("x")}, RandomBytes: 1024}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.Digest(); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left in TMPDIR: %s", e.Name())
	}
}
