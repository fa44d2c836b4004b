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
// shared verdicts; docs/dev/security-tests.md names, for each of its rows,
// the tests that prove the defence.
const threatSection = "### What one scanner can still do, and what stops it"

// TestThreatTableProved keeps the threat table true: every row of
// docs/security.md's table (who, tries) has a row in
// docs/dev/security-tests.md naming the tests (or the make target) that
// prove its defence, and each of them exists.
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
	threats := tableRows(section, 5)
	if len(threats) < 10 {
		t.Errorf("docs/security.md's threat table has %d rows: the parser no longer reads it", len(threats))
	}
	dev, err := os.ReadFile(filepath.Join(root, "docs", "dev", "security-tests.md"))
	if err != nil {
		t.Fatal(err)
	}
	proofs := map[string]string{}
	for _, row := range tableRows(string(dev), 3) {
		proofs[row[0]+"|"+row[1]] = row[2]
	}
	funcs := testFuncs(t, root)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile("`([^`]+)`")
	for _, row := range threats {
		who, tries := row[0], row[2]
		proof, ok := proofs[who+"|"+tries]
		if !ok {
			t.Errorf("docs/dev/security-tests.md has no row for %q trying %q", who, tries)
			continue
		}
		named := names.FindAllStringSubmatch(proof, -1)
		if len(named) == 0 {
			t.Errorf("row %q names no test that proves it", tries)
		}
		for _, p := range named {
			name := p[1]
			if target, ok := strings.CutPrefix(name, "make "); ok {
				if !strings.Contains(string(makefile), "\n"+target+":") {
					t.Errorf("row %q: the Makefile has no target %q", tries, target)
				}
				continue
			}
			if !funcs[name] {
				t.Errorf("row %q: no test named %s", tries, name)
			}
		}
	}
}

// tableRows are the trimmed cells of the rows of the Markdown tables in
// text that have that many columns, header and rule rows left out.
func tableRows(text string, columns int) [][]string {
	var out [][]string
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != columns || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "who" {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		out = append(out, cells)
	}
	return out
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
