// Package gobuild builds the repository's commands for the tests that run
// them as processes, as the release builds them: the Makefile's
// GO_BUILD_FLAGS, static, without VCS stamping. A test runs what ships, and
// the build shares the Go build cache with make build and the tests' own
// compilation. Each set of commands is built once per test binary, by the
// first test needing it.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/eraser-oss/eraser/internal/testing/repo"
)

// flags are the Makefile's GO_BUILD_FLAGS and the -buildvcs=false of its
// GOFLAGS.
var flags = []string{"-trimpath", "-buildvcs=false", "-tags=grpcnotrace", "-ldflags=-s -w"}

// Scanner is the Trivy scanner's module, by its directory.
const Scanner = "scanner/trivy"

// experiment is the GOEXPERIMENT a module builds with: Trivy imports
// encoding/json/v2, behind an experiment in Go 1.26; the operator's
// commands ship without it, even when the scanner module's tests (run
// with it) build them.
func experiment(module string) string {
	if module == Scanner {
		return "GOEXPERIMENT=jsonv2"
	}
	return "GOEXPERIMENT="
}

// Commands are main packages of one module, built together into one
// directory.
type Commands struct {
	module string
	pkgs   []string
	env    []string

	once sync.Once
	dir  string
	err  error
}

// New is the operator's main packages, by their directory from the top of
// the repository ("cmd/manager").
func New(pkgs ...string) *Commands { return &Commands{pkgs: pkgs} }

// InModule is the main packages of the nested module in directory module
// (Scanner, "hack/render"), by their directory from the module's top.
func InModule(module string, pkgs ...string) *Commands {
	return &Commands{module: module, pkgs: pkgs}
}

// For builds the commands for another platform, as a release does.
func (c *Commands) For(goos, goarch string) *Commands {
	c.env = append(c.env, "GOOS="+goos, "GOARCH="+goarch)
	return c
}

// Build builds the commands on the first call and returns the directory
// holding them, each named after its package's directory (with .exe for
// Windows). It is for a TestMain; tests call Dir or Path.
func (c *Commands) Build() (string, error) {
	c.once.Do(func() { c.dir, c.err = c.build() })
	return c.dir, c.err
}

func (c *Commands) build() (string, error) {
	dir, err := os.MkdirTemp("", "eraser-bin-")
	if err != nil {
		return "", err
	}
	args := append([]string{"-C", repo.Path(c.module), "build"}, flags...)
	args = append(args, "-o", dir+string(filepath.Separator))
	for _, p := range c.pkgs {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", experiment(c.module)), c.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("building %s: %w\n%s", strings.Join(c.pkgs, " "), err, out)
	}
	return dir, nil
}

// Dir is Build for a test: a failed build fails every test asking for it.
func (c *Commands) Dir(t testing.TB) string {
	t.Helper()
	dir, err := c.Build()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Path is the path of the first (usually the only) command.
func (c *Commands) Path(t testing.TB) string {
	t.Helper()
	name := filepath.Base(c.pkgs[0])
	if c.goos() == "windows" {
		name += ".exe"
	}
	return filepath.Join(c.Dir(t), name)
}

func (c *Commands) goos() string {
	goos := runtime.GOOS
	if v := os.Getenv("GOOS"); v != "" {
		goos = v
	}
	for _, e := range c.env {
		if v, ok := strings.CutPrefix(e, "GOOS="); ok {
			goos = v
		}
	}
	return goos
}

// Remove deletes the commands if they were built; a TestMain calls it at
// its end.
func (c *Commands) Remove() {
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}
