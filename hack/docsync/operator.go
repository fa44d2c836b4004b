package docsync

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The operators' pages are for those who run Eraser: what the tests are
// called and how they are grouped is the developers' business (docs/dev),
// and a word the glossary gives a meaning of its own is one the reader can
// look up from the page that uses it.
var (
	testName = regexp.MustCompile(`\b(Test|Fuzz|Benchmark)[A-Z]\w*`)
	tierWord = regexp.MustCompile(`(?i)\btiers?\b`)
	// glossaryLink is a link to the glossary from a page of docs/ or from
	// the README.
	glossaryLink = regexp.MustCompile(`\]\((docs/)?glossary\.md(#[^)]*)?\)`)
	termHeading  = regexp.MustCompile(`(?m)^###\s+(.+?)\s*$`)
)

// Term is a word of the glossary and how a page says it.
type Term struct {
	Name string
	Said *regexp.Regexp
}

// saidAs are the glossary's words that are also ordinary English, as a
// page says them in the glossary's sense; "" is a word every page says in
// both senses (a run), which no link would help with.
var saidAs = map[string]string{
	"Run":     "",
	"Refused": "",
	"Pass":    `(?i)\b(a|each|one|every|per|next|same|that|this|the manager's) pass(es)?\b`,
	"Claim":   `(?i)\bclaims\b|\b(a|its|one|the|verdict) claim\b`,
	"Pause":   `(?i)\bpaused\b|\beraser pause\b|\beraser-pause\b`,
}

// GlossaryTerms are the glossary's words, its level-3 headings, each said
// in any case, as one word (a hyphen or a space between its parts), or
// plural: "hand-off" is also "hand-offs", "Last good configuration" also
// "last-good". A heading's leading "The" is not part of the word. Words of
// ordinary English are said as saidAs says.
func GlossaryTerms(glossary string) []Term {
	var terms []Term
	for _, m := range termHeading.FindAllStringSubmatch(glossary, -1) {
		name := m[1]
		if rx, ok := saidAs[name]; ok {
			if rx != "" {
				terms = append(terms, Term{Name: name, Said: regexp.MustCompile(rx)})
			}
			continue
		}
		words := strings.Fields(strings.NewReplacer("-", " ").Replace(strings.TrimPrefix(name, "The ")))
		for i, w := range words {
			words[i] = regexp.QuoteMeta(w)
		}
		said := `(?i)\b` + strings.Join(words, `[- ]`) + `(s|es)?\b`
		if len(words) > 2 {
			// "Last good configuration": "last-good" alone says it too.
			said = `(?i)\b(` + strings.Join(words, `[- ]`) + `|` + strings.Join(words[:2], `-`) + `)(s|es)?\b`
		}
		terms = append(terms, Term{Name: name, Said: regexp.MustCompile(said)})
	}
	return terms
}

// OperatorProblems are what the operators' pages say that is not for them:
// a test's name or a test tier anywhere in a page (its code and comments
// included), and a glossary word on a page that never links the glossary.
// pages maps a page's path to its text; the glossary's own page is not
// asked to link itself.
func OperatorProblems(pages map[string]string, terms []Term) []string {
	var problems []string
	for path, text := range pages {
		for _, m := range unique(testName.FindAllString(text, -1)) {
			problems = append(problems, fmt.Sprintf("%s: names the test %s: tests are described in docs/dev", path, m))
		}
		if m := tierWord.FindAllString(text, -1); len(m) > 0 {
			problems = append(problems, fmt.Sprintf("%s: says %q %d time(s): test tiers are described in docs/dev", path, m[0], len(m)))
		}
		if strings.HasSuffix(path, "glossary.md") || glossaryLink.MatchString(text) {
			continue
		}
		prose := stripped(text)
		var used []string
		for _, t := range terms {
			if m := t.Said.FindString(prose); m != "" {
				used = append(used, fmt.Sprintf("%q (%s)", m, t.Name))
			}
		}
		if len(used) > 0 {
			problems = append(problems, fmt.Sprintf("%s: uses the glossary's words %s and links no glossary entry: link the word's first use to glossary.md#<word>", path, strings.Join(used, ", ")))
		}
	}
	slices.Sort(problems)
	return problems
}

func unique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
