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
