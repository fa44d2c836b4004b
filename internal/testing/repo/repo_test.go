package repo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModulePath(t *testing.T) {
	cases := map[string]string{
		"module github.com/eraser-oss/eraser\n\ngo 1.26\n":           Module,
		"// the operator\nmodule \"github.com/eraser-oss/eraser\"\n": Module,
		"module github.com/eraser-oss/eraser/hack/render\n":          Module + "/hack/render",
		"go 1.26\n":   "",
		"modules x\n": "",
	}
	for in, want := range cases {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRoot: found from this package's directory, two levels below the top.
func TestRoot(t *testing.T) {
	root := Root()
	if _, err := os.Stat(filepath.Join(root, "internal", "testing", "repo", "repo.go")); err != nil {
		t.Fatalf("Root() = %s, which does not hold this package: %v", root, err)
	}
	if got := Path("go.mod"); got != filepath.Join(root, "go.mod") {
		t.Errorf("Path(go.mod) = %s", got)
	}
}
