// Command layers fails when an import crosses the project's layers the
// wrong way, in product code or in tests, so that the manager and the node
// workers stay two programs that share only the contracts between them.
// Run by hack/verify.sh.
//
// It lists the root module's packages (and the Trivy scanner module's, which
// runs on the node, and the regret benchmark's, which assembles the node's
// packages with the kubelet's) with `go list` and checks each import
// against rules.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// module is the root module's path; layers are read from the path below it.
const module = "github.com/eraser-oss/eraser"

func main() {
	var pkgs []Package
	for _, dir := range []string{".", "scanner/trivy", "test/bench/regret"} {
		listed, err := list(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "layers:", err)
			os.Exit(2)
		}
		pkgs = append(pkgs, listed...)
	}
	problems := Check(pkgs)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "layers:", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "layers: %d import(s) cross the layers the wrong way; docs/dev/architecture.md says which way each may point\n", len(problems))
		os.Exit(1)
	}
}

// list runs `go list` in a module's directory with the flags its builds use.
func list(dir string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-tags=grpcnotrace")
	if dir == "scanner/trivy" {
		cmd.Env = append(cmd.Env, "GOEXPERIMENT=jsonv2")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list in %s: %w", dir, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// Package is what `go list -json` says of one package.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	// Deps is every package the product code needs, directly or not.
	Deps []string
}

// Check returns each import that crosses the layers the wrong way, sorted.
func Check(pkgs []Package) []string {
	deps := map[string][]string{}
	for _, p := range pkgs {
		deps[p.ImportPath] = p.Deps
	}
	var problems []string
	for _, p := range pkgs {
		from := LayerOf(p.ImportPath)
		for _, imp := range p.Imports {
			if to := LayerOf(imp); !Allowed(from, to) {
				problems = append(problems, fmt.Sprintf("%s imports %s (%s may not import %s)", p.ImportPath, imp, from, to))
			}
		}
		for _, imp := range append(append([]string{}, p.TestImports...), p.XTestImports...) {
			to := LayerOf(imp)
			if !AllowedInTests(from, to) {
				problems = append(problems, fmt.Sprintf("%s's tests import %s (%s may not import %s)", p.ImportPath, imp, from, to))
				continue
			}
			// Test support may import any side; a side's test reaching the
			// other side through it crosses the layers all the same.
			if to != Testing || !sides[from] {
				continue
			}
			for _, dep := range deps[imp] {
				if d := LayerOf(dep); sides[d] && !AllowedInTests(from, d) {
					problems = append(problems, fmt.Sprintf("%s's tests import %s, which needs %s (%s may not import %s)", p.ImportPath, imp, dep, from, d))
				}
			}
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

// sides are the layers whose tests may not reach each other even through
// test support: the node workers' and the manager's, and their front ends.
var sides = map[Layer]bool{Pkg: true, Node: true, Scanner: true, Manager: true, CLI: true}

// Layer is a part of the code that imports point into, one way.
type Layer string

// The layers, from the bottom.
const (
	// Outside is the standard library and other modules: anyone may use them.
	Outside Layer = "outside"
	API     Layer = "api"
	Util    Layer = "internal/util"
	// Stamp is the release and registry the build stamps into every
	// binary: the configuration's image defaults read it as much as the
	// binaries' start-up does.
	Stamp Layer = "internal/process/version"
	Wire  Layer = "internal/wire"
	// Process is what every binary sets up at start: its log level (which
	// writes the result lines the report reads) and memory limit.
	Process Layer = "internal/process"
	// Pkg is what custom scanner authors import: node-side helpers.
	Pkg     Layer = "pkg"
	Node    Layer = "internal/node"
	Manager Layer = "internal/manager"
	// CLI is the front ends, which use both sides.
	CLI Layer = "internal/cli"
	// Testing is test support: it serves tests of either side.
	Testing Layer = "internal/testing"
	// Scanner is the Trivy scanner module, a node worker.
	Scanner Layer = "scanner"
	// Top is everything that assembles the others: cmd/, test/, hack/,
	// examples/. Nothing in the module imports it.
	Top Layer = "top"
)

// LayerOf is the layer of an import path.
func LayerOf(path string) Layer {
	rest, ok := strings.CutPrefix(path, module)
	if !ok || (rest != "" && rest[0] != '/') {
		return Outside
	}
	rest = strings.TrimPrefix(rest, "/")
	if strings.HasPrefix(rest, "scanner/") {
		// The scanner module's own end-to-end suites assemble it with the
		// manager's scan service, as test/ does for the root module.
		if strings.Contains(rest, "/test/") {
			return Top
		}
		// Its fixtures (an offline DB, images in a registry) are its test
		// support.
		if strings.HasSuffix(rest, "/internal/fixture") {
			return Testing
		}
		return Scanner
	}
	for _, l := range []Layer{API, Util, Stamp, Wire, Process, Pkg, Node, Manager, CLI, Testing} {
		if rest == string(l) || strings.HasPrefix(rest, string(l)+"/") {
			return l
		}
	}
	return Top
}

// below lists, for each layer, the layers its product code may import
// besides its own and Outside.
var below = map[Layer][]Layer{
	API:     {},
	Util:    {},
	Stamp:   {},
	Wire:    {API, Util, Stamp},
	Process: {API, Util, Stamp, Wire},
	Pkg:     {API, Util, Stamp, Wire, Process, Node},
	Node:    {API, Util, Stamp, Wire, Process, Pkg},
	Manager: {API, Util, Stamp, Wire, Process},
	CLI:     {API, Util, Stamp, Wire, Process, Pkg, Node, Manager},
	Testing: {API, Util, Stamp, Wire, Process, Pkg, Node, Manager},
	Scanner: {API, Util, Stamp, Wire, Process, Pkg, Node},
	Top:     {API, Util, Stamp, Wire, Process, Pkg, Node, Manager, CLI, Testing, Scanner},
}

// Allowed is whether product code in from may import a package in to.
func Allowed(from, to Layer) bool {
	if to == Outside || to == from {
		return true
	}
	for _, l := range below[from] {
		if l == to {
			return true
		}
	}
	return false
}

// AllowedInTests is whether a test of a package in from may import a package
// in to: what its product code may, and test support.
func AllowedInTests(from, to Layer) bool {
	if from == Top {
		return true
	}
	return to == Testing || Allowed(from, to)
}
