package scanservice

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// threatSection is the heading of docs/security.md's threat table for the
// shared verdicts.
const threatSection = "### What one scanner can still do, and what stops it"

// TestThreatTableProved keeps docs/security.md's threat table true: every
// row names the tests (or the make target) that prove its defence, and
// each of them exists.
func TestThreatTableProved(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), threatSection+"\n")
	if !ok {
		t.Fatalf("docs/security.md has no %q section", threatSection)
	}
	section, _, _ = strings.Cut(section, "\n#")
	funcs := testFuncs(t, root)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`([^`]+)`")
	rows := 0
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 6 || strings.TrimSpace(cells[0]) == "who" || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		rows++
		proofs := names.FindAllStringSubmatch(cells[5], -1)
		if len(proofs) == 0 {
			t.Errorf("row %q names no test that proves it", strings.TrimSpace(cells[3]))
		}
		for _, p := range proofs {
			name := p[1]
			if target, ok := strings.CutPrefix(name, "make "); ok {
				if !strings.Contains(string(makefile), "\n"+target+":") {
					t.Errorf("row %q: the Makefile has no target %q", strings.TrimSpace(cells[2]), target)
				}
				continue
			}
			if !funcs[name] {
				t.Errorf("row %q: no test named %s", strings.TrimSpace(cells[2]), name)
			}
		}
	}
	if rows < 10 {
		t.Errorf("the threat table has %d rows: the parser no longer reads it", rows)
	}
}

// testFuncs are the names of the repository's test, fuzz and benchmark
// functions.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(data), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
