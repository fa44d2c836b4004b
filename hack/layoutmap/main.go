// Command layoutmap fails when the contributors' map of the code
// (docs/dev/packages.md) misses a Go package under internal/, or names one
// that no longer exists, so that the map a newcomer reads stays the tree they
// clone. Run by hack/verify.sh.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// mapFile is the page that holds the map, from the repository's root.
const mapFile = "docs/dev/packages.md"

func main() {
	page, err := os.ReadFile(mapFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layoutmap:", err)
		os.Exit(2)
	}
	problems := check(string(page), packages("internal"))
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "layoutmap:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

// packages lists every directory under root that holds a Go file.
func packages(root string) map[string]bool {
	pkgs := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			pkgs[filepath.ToSlash(filepath.Dir(p))+"/"] = true
		}
		return nil
	})
	return pkgs
}

// A map row names a package in its first cell, in backquotes.
var row = regexp.MustCompile("(?m)^\\| `(internal/[^`]*/)` \\|")

func check(page string, pkgs map[string]bool) []string {
	listed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(page, -1) {
		listed[m[1]] = true
	}
	var problems []string
	for p := range pkgs {
		if !listed[p] {
			problems = append(problems, fmt.Sprintf("%s does not list %s", mapFile, p))
		}
	}
	for p := range listed {
		if !pkgs[p] && !holdsPackages(p, pkgs) {
			problems = append(problems, fmt.Sprintf("%s lists %s, which holds no Go package", mapFile, p))
		}
	}
	sort.Strings(problems)
	return problems
}

// holdsPackages says whether dir is a folder of packages (a side of the
// system), which the map may describe as a whole.
func holdsPackages(dir string, pkgs map[string]bool) bool {
	for p := range pkgs {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}
