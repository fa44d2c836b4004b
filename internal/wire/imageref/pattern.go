package imageref

import (
	"strings"

	"github.com/distribution/reference"
)

// Pattern is one entry of an exclusion list. Upstream's forms are kept:
//
//   - an exact reference, digest or image ID, matched as an ImageList entry is;
//   - "registry/path/*": every image whose repository is under that path;
//   - "repo:*": every tag and digest of that repository;
//   - "*": every image. Upstream silently ignored a lone "*"; an exclusion
//     list exists to protect, so here it protects everything.
//
// Upstream matched the two wildcard forms as string prefixes of the names
// the runtime reports (the text before "*" for "path/*", before the first
// ":" for "repo:*"), so "docker.io/library/nginx:*" also caught
// "docker.io/library/nginx-exporter". A pattern here protects at least what
// upstream's did: those prefixes as well as the repositories above. So
// "host:port/repo:*" protects every image whose name starts with "host", as
// upstream read it (a legacy entry: its writer most likely meant the one
// repository, and a list that protected the whole registry must not start
// losing images on upgrade).
//
// Upstream accepted any string and compared it as text, so an entry that is
// none of the forms above (a legacy entry, Legacy says how it is read) is
// never an error, which would stop every node's run over a list that worked
// before: it is read at least as protectively as upstream read it.
//   - One with a "*" elsewhere ("nginx:1.*", "*/pause:*") matched nothing
//     upstream, as "*" was not a wildcard there. Here it is a glob, "*"
//     standing for any text, "/" and ":" included, matched against each
//     name the runtime reports, its short form ("nginx:1.25") and its form
//     without "docker.io/" ("library/nginx:1.25"): the images its writer
//     most likely meant stay. Where upstream's prefix reading applied (it
//     ends in "/*" or ":*"), that prefix protects too.
//   - One without "*" that is no reference ("alpine latest", "Nginx") is
//     compared as text with the names the runtime reports, as upstream did.
type Pattern struct {
	raw string
	all bool
	// under is a repository path prefix ending in "/".
	under string
	// repo matches every reference of one repository.
	repo string
	// prefix is upstream's string prefix of a wildcard form.
	prefix string
	ref    *Ref
	// glob is a legacy entry with a "*" elsewhere than at its end.
	glob string
	// literal is a legacy entry that is no reference, compared as text
	// (raw): the empty string too, which upstream compared with a name
	// the runtime reported empty.
	literal bool
	legacy  string
}

// How a legacy entry is read (Pattern.Legacy).
const (
	LegacyAll         = `a lone "*" protects every image (upstream ignored it: it protected none)`
	LegacyGlob        = `read as a glob, "*" standing for any text, matched against each image name in full and short form (upstream compared it as text: it protected none)`
	LegacyEmptyPrefix = `protects every image, as upstream, which read the text before its first ":" as a prefix of every name`
	LegacyLiteral     = `not an image reference: compared as text with the names the runtime reports, as upstream did (it protects only an image named exactly so)`
	LegacyPortPrefix  = `protects this repository and every image whose name starts with the text before its first ":", the registry's host without its port, as upstream read it; to protect less, list the tags or write "host:port/path/*"`
)

// ParsePattern reads one exclusion entry. Every string is a pattern: see
// Pattern for how one in none of the documented forms is read.
func ParsePattern(s string) Pattern {
	p := Pattern{raw: s}
	switch {
	case s == "*":
		p.all = true
		p.legacy = LegacyAll
		return p
	case strings.HasSuffix(s, "/*"):
		prefix := strings.TrimSuffix(s, "/*")
		if prefix != "" && !strings.Contains(prefix, "*") {
			if under, ok := normalisePath(prefix); ok {
				p.under = under + "/"
				p.prefix = strings.TrimSuffix(s, "*")
				return p
			}
		}
	case strings.HasSuffix(s, ":*"):
		repo := strings.TrimSuffix(s, ":*")
		if !strings.Contains(repo, "*") {
			if named, err := reference.ParseNormalizedNamed(repo); err == nil && reference.IsNameOnly(named) {
				p.repo = named.Name()
				p.prefix = colonPrefix(s)
				if strings.Contains(repo, ":") {
					// A repository's only ":" is a port's:
					// upstream's prefix is the bare host.
					p.legacy = LegacyPortPrefix
				}
				return p
			}
		}
	case !strings.Contains(s, "*"):
		if r, err := Parse(s); err == nil {
			p.ref = &r
			return p
		}
		p.literal = true
		p.legacy = LegacyLiteral
		return p
	}
	if strings.HasPrefix(s, ":") && strings.HasSuffix(s, ":*") {
		// Upstream's prefix was "", which every name starts with.
		p.all = true
		p.legacy = LegacyEmptyPrefix
		return p
	}
	p.glob = s
	p.legacy = LegacyGlob
	// Upstream's prefix, so that what it protected stays protected. One
	// holding a "*" was text to it too, which a name the runtime reports
	// could in principle start with.
	if strings.HasSuffix(s, "/*") {
		p.prefix = strings.TrimSuffix(s, "*")
	} else if strings.HasSuffix(s, ":*") {
		p.prefix = colonPrefix(s)
	}
	return p
}

// colonPrefix is upstream's prefix of a "repo:*" entry: the text before its
// first ":", even where that ":" is a registry's port, which makes it the
// bare host and so every image of the registry (and of any other port of
// that host, and any name starting with that text).
func colonPrefix(s string) string {
	before, _, _ := strings.Cut(s, ":")
	return before
}

// normalisePath turns "docker.io/library", "library", "quay.io",
// "localhost:5000/team" or "team" into the normalised repository prefix they
// denote, by normalising a repository just below it.
func normalisePath(prefix string) (string, bool) {
	if prefix == "docker.io" || prefix == "index.docker.io" {
		// Below, "docker.io/x" would normalise to "docker.io/library/x".
		return "docker.io", true
	}
	named, err := reference.ParseNormalizedNamed(prefix + "/x")
	if err != nil {
		return "", false
	}
	return strings.TrimSuffix(named.Name(), "/x"), true
}

// String is the pattern as written.
func (p Pattern) String() string { return p.raw }

// Legacy says how an entry that upstream read differently is read here,
// or is "" for the documented forms. Such an entry still protects at least
// what upstream's did; the manager warns of it, so that it can be
// rewritten in one of the documented forms.
func (p Pattern) Legacy() string { return p.legacy }

// globMatch reports whether s matches the glob, "*" standing for any text.
// Greedy with one back-track point, so at most len(glob)*len(s) steps.
func globMatch(glob, s string) bool {
	gi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case gi < len(glob) && glob[gi] == '*':
			star, mark = gi, si
			gi++
		case gi < len(glob) && glob[gi] == s[si]:
			gi++
			si++
		case star >= 0:
			gi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}

// forText calls f with each name the runtime reports for the image, as
// text: its ID, tags, repo digests and their digests.
func forText(img Image, f func(string)) {
	f(img.ID)
	for _, t := range img.Tags {
		f(t)
	}
	for _, d := range img.Digests {
		f(d)
		if _, dig, ok := strings.Cut(d, "@"); ok {
			f(dig)
		}
	}
}

// globForms are the strings a legacy glob is matched against: each name
// the runtime reports (forText), and each reference's normal form, short
// form and normal form without "docker.io/".
func globForms(img Image) []string {
	var forms []string
	forText(img, func(n string) { forms = append(forms, n) })
	for _, n := range append(append([]string(nil), img.Tags...), img.Digests...) {
		named, err := reference.ParseNormalizedNamed(n)
		if err != nil {
			continue
		}
		full := named.String()
		forms = append(forms, full, reference.FamiliarString(named), strings.TrimPrefix(full, "docker.io/"))
	}
	return forms
}

// globMatches reports whether a legacy glob protects an image known by
// these forms (globForms).
func (p Pattern) globMatches(forms []string) bool {
	if p.glob == "" {
		return false
	}
	for _, f := range forms {
		if globMatch(p.glob, f) {
			return true
		}
	}
	return false
}
