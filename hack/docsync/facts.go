package docsync

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Fact is something several operator pages mention and one page states:
// Owner holds the statement (States matches it, on that page alone), the
// others link to it, and no page says Contradicts (wordings that said the
// opposite on some page once).
type Fact struct {
	Owner       string
	States      *regexp.Regexp
	Contradicts []*regexp.Regexp
}

func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// Facts are the facts the pages disagreed on, each stated once.
var Facts = map[string]Fact{
	"the chart's schema checks runtimeConfig": {
		Owner:       "docs/install.md",
		States:      re(`` + "`runtimeConfig`" + ` is the ` + "`EraserConfig`" + ` document: the schema carries its keys and types`),
		Contradicts: []*regexp.Regexp{re(`(?i)left open to the schema`), re(`(?i)schema (does not|doesn't) check ` + "`?runtimeConfig")},
	},
	"an invalid configuration at start-up holds the manager back": {
		Owner:       "docs/configuration.md",
		States:      re(`It never exits into a crash loop`),
		Contradicts: []*regexp.Regexp{re(`(?i)the manager exits (with )?1`), re(`(?i)invalid (` + "`?EraserConfig`?" + `|configuration|config)[^.]*(crash-?loops|manager exits)`)},
	},
	"the pod timeouts are measured on the manager's clock": {
		Owner:       "docs/configuration.md",
		States:      re(`are measured on the manager's own clock`),
		Contradicts: []*regexp.Regexp{re(`(?i)timeouts? (is|are) measured from the pod's`), re(`(?i)measured from the pod's ` + "`?creationTimestamp")},
	},
	"a run-now request made while paused runs on resume": {
		Owner:       "docs/run-now.md",
		States:      re(`A request made while removals are \[paused\]\([^)]*\) is kept: it runs on resume`),
		Contradicts: []*regexp.Regexp{re(`(?i)never queued`), re(`(?i)(run-now|request)[^.]*paused[^.]*(refused|dropped|lost)`)},
	},
	"upstream's queries by job label match nothing": {
		Owner:       "docs/metrics.md",
		States:      re("no series carries `job=\"remover\"` or `job=\"trivy-scanner\"`, and those selectors match nothing"),
		Contradicts: []*regexp.Regexp{re(`(?i)(existing|upstream's) dashboards (and alerts )?keep working`)},
	},
	"exclusion patterns upstream accepted never fail a run": {
		Owner:  "docs/configuration.md",
		States: re(`A list that upstream accepted never fails a run\s+here`),
		Contradicts: []*regexp.Regexp{re(`(?i)(other|any other) wildcard forms? (than [^.]*)?(are|is an?) errors?`),
			re(`(?i)` + "`repo:1\\.\\*`" + `[^.|]*(error|refused|fails|read as a prefix)`)},
	},
	"the workers' ServiceAccount mounts no token; the scanner gets one for the scan service": {
		Owner:       "docs/install.md",
		States:      re(`does not mount a token, as workers never call the API server\. The scanner container alone gets a token projected`),
		Contradicts: []*regexp.Regexp{re(`(?i)worker pods: no token`), re(`(?i)workers? (pods )?(get|have|carry) no token`)},
	},
	"eraser node prune exits 3 only on failed removals": {
		Owner:       "docs/cli.md",
		States:      re("`3` \\| removals failed \\(`failed`"),
		Contradicts: []*regexp.Regexp{re(`(?i)exit(s| status| code)? 3[^.|]*refused`), re(`(?i)removals failed \(the runtime refused`)},
	},
}

var space = regexp.MustCompile(`\s+`)

// FactProblems are the pages that disagree on the facts: a statement
// missing from its owner or repeated on another page, a contradicting
// wording anywhere. pages maps a page's path to its text.
func FactProblems(facts map[string]Fact, pages map[string]string) []string {
	var problems []string
	for name, f := range facts {
		for path, text := range pages {
			flat := space.ReplaceAllString(text, " ")
			states := f.States.MatchString(flat)
			switch {
			case path == f.Owner && !states:
				problems = append(problems, fmt.Sprintf("%s: no longer states %q (%s): state it here, or move the fact and its test", path, name, f.States))
			case path != f.Owner && states:
				problems = append(problems, fmt.Sprintf("%s: states %q again: %s states it; link there", path, name, f.Owner))
			}
			for _, c := range f.Contradicts {
				if m := c.FindString(flat); m != "" {
					problems = append(problems, fmt.Sprintf("%s: %q contradicts %q, which %s states", path, m, name, f.Owner))
				}
			}
		}
		if _, ok := pages[f.Owner]; !ok {
			problems = append(problems, fmt.Sprintf("%s, which states %q, is not among the pages", f.Owner, name))
		}
	}
	slices.Sort(problems)
	return problems
}

// stripped is text without its fenced code blocks, whose commands and
// output are not statements.
func stripped(text string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
