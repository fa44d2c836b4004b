// Package repo finds the repository's own files from a test, wherever the
// test was built from.
package repo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Module is the operator's module path, named in the go.mod at the top of
// the repository.
const Module = "github.com/eraser-oss/eraser"

// Root is the repository's top directory: the nearest directory at or above
// the working directory (go test runs a test in its package's directory)
// whose go.mod is the operator's. The nested modules (hack/render,
// scanner/trivy) are passed over. It is found from the working directory,
// not from a source file's compiled path, which -trimpath rewrites.
func Root() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("finding the repository: %v", err))
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(data) == Module {
			return dir
		}
		if filepath.Dir(dir) == dir {
			panic(fmt.Sprintf("no go.mod of %s at or above %s", Module, wd))
		}
	}
}

// Path is a file of the repository, by its path from the top.
func Path(parts ...string) string {
	return filepath.Join(append([]string{Root()}, parts...)...)
}

// modulePath is the path a go.mod's module line declares.
func modulePath(gomod []byte) string {
	s := bufio.NewScanner(bytes.NewReader(gomod))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
