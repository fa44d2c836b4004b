package docsync

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/repo"
)

// operatorPages are the pages for those who run Eraser, by path from the
// repository's root.
func operatorPages(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repo.Root(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, p := range paths {
		rel := "docs/" + filepath.Base(p)
		pages[rel] = stripped(readRepo(t, "docs", filepath.Base(p)))
	}
	pages["README.md"] = stripped(readRepo(t, "README.md"))
	pages["charts/eraser/README.md"] = stripped(readRepo(t, "charts", "eraser", "README.md"))
	return pages
}

// TestFactsStatedOnce: each fact the pages once disagreed on is stated by
// one page, and no page says otherwise.
func TestFactsStatedOnce(t *testing.T) {
	for _, p := range FactProblems(Facts, operatorPages(t)) {
		t.Error(p)
	}
}

func TestFactProblems(t *testing.T) {
	facts := map[string]Fact{"the clock": {
		Owner:       "a.md",
		States:      regexp.MustCompile(`measured on the manager's clock`),
		Contradicts: []*regexp.Regexp{regexp.MustCompile(`measured from the pod's`)},
	}}
	tests := map[string]struct {
		pages map[string]string
		want  []string
	}{
		"stated once, linked elsewhere": {
			pages: map[string]string{"a.md": "Timeouts are measured on the\nmanager's clock.", "b.md": "See [the clock](a.md)."},
		},
		"two pages disagree": {
			pages: map[string]string{"a.md": "measured on the manager's clock", "b.md": "Timeouts are measured from the pod's creationTimestamp."},
			want:  []string{`b.md: "measured from the pod's" contradicts "the clock", which a.md states`},
		},
		"stated twice": {
			pages: map[string]string{"a.md": "measured on the manager's clock", "b.md": "also measured on the manager's clock"},
			want:  []string{`b.md: states "the clock" again: a.md states it; link there`},
		},
		"the owner no longer states it": {
			pages: map[string]string{"a.md": "nothing", "b.md": "nothing"},
			want:  []string{`a.md: no longer states "the clock" (measured on the manager's clock): state it here, or move the fact and its test`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, FactProblems(facts, tc.pages)); diff != "" {
				t.Errorf("FactProblems (-want +got):\n%s", diff)
			}
		})
	}
}

// operatorPagesRaw are README.md and docs/*.md as they are, code blocks
// and comments included.
func operatorPagesRaw(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repo.Root(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{"README.md": readRepo(t, "README.md")}
	for _, p := range paths {
		pages["docs/"+filepath.Base(p)] = readRepo(t, "docs", filepath.Base(p))
	}
	return pages
}

// TestOperatorPagesAreForOperators: README.md and docs/*.md name no test
// and no test tier, and a page that uses a word of the glossary links it.
func TestOperatorPagesAreForOperators(t *testing.T) {
	terms := GlossaryTerms(readRepo(t, "docs", "glossary.md"))
	if len(terms) < 10 {
		t.Fatalf("docs/glossary.md: %d terms read, want its ### headings", len(terms))
	}
	for _, p := range OperatorProblems(operatorPagesRaw(t), terms) {
		t.Error(p)
	}
}

func TestOperatorProblems(t *testing.T) {
	terms := GlossaryTerms("# Glossary\n\n### Run\n\nOne job.\n\n### Wave\n\nNodes.\n\n### Pass\n\nA round.\n\n### Last good configuration\n\nThe last one.\n")
	for name, c := range map[string]struct {
		page string
		want []string
	}{
		"plain":                  {"Remove images, then run it again. It passes the string through.", nil},
		"a test's name":          {"Proved by `TestScanFlood`.", []string{"p.md: names the test TestScanFlood: tests are described in docs/dev"}},
		"a test in a comment":    {"<!-- written by go test -run TestDocs -->", []string{"p.md: names the test TestDocs: tests are described in docs/dev"}},
		"a tier":                 {"The install tier runs it.", []string{`p.md: says "tier" 1 time(s): test tiers are described in docs/dev`}},
		"a term, no link":        {"Each wave starts.", []string{`p.md: uses the glossary's words "wave" (Wave) and links no glossary entry: link the word's first use to glossary.md#<word>`}},
		"a term, linked":         {"Each [wave](glossary.md#wave) starts; later waves too.", nil},
		"another term linked":    {"Each wave, [last-good](glossary.md#last-good-configuration).", nil},
		"a term in code":         {"```\nwave: 1\n```\n", nil},
		"an ordinary word's use": {"Each pass of the manager.", []string{`p.md: uses the glossary's words "Each pass" (Pass) and links no glossary entry: link the word's first use to glossary.md#<word>`}},
		"the short form":         {"ConfigMap last-good.", []string{`p.md: uses the glossary's words "last-good" (Last good configuration) and links no glossary entry: link the word's first use to glossary.md#<word>`}},
	} {
		if diff := cmp.Diff(c.want, OperatorProblems(map[string]string{"p.md": c.page}, terms)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
