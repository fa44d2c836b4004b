// Command doclinks checks the relative links of markdown files: every
// [text](target) and [label]: target that is not a URL must name a file or
// directory that exists, and its #anchor, if any, a heading of the target
// markdown file (GitHub's heading ids). It prints each broken link as
// file:line and exits 1 if there is one. Run by hack/verify.sh:
//
//	go run ./hack/doclinks README.md CONTRIBUTING.md docs/*.md
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// [text](target) or [text](target "title"); images too.
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// [label]: target
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	heading  = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

type link struct {
	file   string
	line   int
	target string
}

// doc is what one markdown file offers and asks for.
type doc struct {
	anchors map[string]bool
	links   []link
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: doclinks FILE.md...")
		os.Exit(2)
	}
	docs := map[string]*doc{}
	load := func(path string) (*doc, error) {
		path = filepath.Clean(path)
		if d, ok := docs[path]; ok {
			return d, nil
		}
		d, err := parse(path)
		if err != nil {
			return nil, err
		}
		docs[path] = d
		return d, nil
	}

	broken := 0
	report := func(l link, format string, args ...any) {
		fmt.Printf("%s:%d: link %s: %s\n", l.file, l.line, l.target, fmt.Sprintf(format, args...))
		broken++
	}
	for _, path := range os.Args[1:] {
		d, err := load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, l := range d.links {
			if scheme.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue // a URL, not this check's business
			}
			file, anchor, _ := strings.Cut(l.target, "#")
			target := filepath.Clean(path)
			if file != "" {
				if strings.HasPrefix(file, "/") {
					report(l, "absolute path; use a path relative to %s", filepath.Dir(path))
					continue
				}
				target = filepath.Join(filepath.Dir(path), file)
				if chart := chartOf(path); chart != "" && !within(chart, target) {
					report(l, "leaves the chart %s: a chart pulled from a registry holds only its own files; name the page in the text", chart)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					report(l, "%s does not exist", target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				report(l, "an anchor into %s, which is not markdown", target)
				continue
			}
			td, err := load(target)
			if err != nil {
				report(l, "%v", err)
				continue
			}
			if !td.anchors[anchor] {
				report(l, "%s has no heading with anchor #%s", target, anchor)
			}
		}
	}
	if broken > 0 {
		fmt.Printf("%d broken markdown links\n", broken)
		os.Exit(1)
	}
}

// chartOf is the Helm chart directory (the nearest holding a Chart.yaml)
// that the markdown file at path is packaged with, or "".
func chartOf(path string) string {
	for dir := filepath.Dir(filepath.Clean(path)); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err == nil {
			return dir
		}
		if dir == "." || dir == "/" || dir == filepath.Dir(dir) {
			return ""
		}
	}
}

// within says whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// parse reads a markdown file's heading anchors and links, outside fenced
// code blocks and code spans.
func parse(path string) (*doc, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			id := slug(m[1])
			if k := seen[id]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", id, k)] = true
			} else {
				d.anchors[id] = true
			}
			seen[id]++
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			d.links = append(d.links, link{path, n, strings.Trim(m[1], "<>")})
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			d.links = append(d.links, link{path, n, strings.Trim(m[1], "<>")})
		}
	}
	return d, sc.Err()
}

// slug is GitHub's id for a heading: the text without markup, lower case,
// spaces as hyphens, and only letters, digits, hyphens and underscores kept.
func slug(text string) string {
	// [text](url) in a heading counts as its text.
	text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
