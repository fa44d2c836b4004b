package imageref

import "strings"

// Exclusions is a list of patterns indexed for judging many images: a map
// per pattern form, so that an image costs one parse of each of its names
// and a few map look-ups, whatever the number of patterns. Build it once per
// run; it is read-only afterwards and safe for concurrent use.
//
// It decides exactly as trying every pattern in list order would, and names
// the same pattern: the first in the list that matches.
type Exclusions struct {
	pats []Pattern
	// all is the position of the first "*", or -1.
	all int
	// exact maps a reference's normal form (Ref.String) to the first
	// pattern naming it: it matches an image with that key (Image.Keys).
	exact map[string]int
	// repos maps a repository to the first "repository:*" of it.
	repos map[string]int
	// under maps a path prefix ending in "/" to the first "path/*" of it: it
	// matches every repository that starts with it, so a repository is
	// looked up by each of its prefixes that end in "/".
	under map[string]int
	// prefixes are the positions of the wildcard patterns, in list order,
	// for upstream's string prefixes, each prefix at its first position
	// only (every "host:port/repo:*" of a registry has the host's): few,
	// so tried in turn.
	prefixes []int
	// text maps an entry with no "*" as written to the first such entry:
	// it matches an image with a name that is that text (an ID, tag, repo
	// digest or digest as the runtime reports it), as upstream compared.
	text map[string]int
	// legacy are the positions of the legacy globs and literals, in list
	// order, tried in turn: an exclusion list holds few.
	legacy []int
}

// NewExclusions indexes the patterns; they are not copied and must not be
// changed afterwards.
func NewExclusions(pats []Pattern) *Exclusions {
	x := &Exclusions{pats: pats, all: -1, exact: map[string]int{}, repos: map[string]int{}, under: map[string]int{}, text: map[string]int{}}
	first := func(m map[string]int, k string, i int) {
		if _, ok := m[k]; !ok {
			m[k] = i
		}
	}
	seen := map[string]bool{}
	prefix := func(i int, p string) {
		if !seen[p] {
			seen[p] = true
			x.prefixes = append(x.prefixes, i)
		}
	}
	for i, p := range pats {
		switch {
		case p.all:
			if x.all < 0 {
				x.all = i
			}
		case p.ref != nil:
			first(x.exact, p.ref.String(), i)
			first(x.text, p.raw, i)
		case p.literal:
			first(x.text, p.raw, i)
		case p.glob != "":
			x.legacy = append(x.legacy, i)
			if p.prefix != "" {
				prefix(i, p.prefix)
			}
		default:
			// A pattern with neither matches nothing, as Matches does.
			if p.repo != "" {
				first(x.repos, p.repo, i)
			}
			if p.under != "" {
				first(x.under, p.under, i)
			}
			if p.prefix != "" {
				prefix(i, p.prefix)
			}
		}
	}
	return x
}

// Len is the number of patterns indexed.
func (x *Exclusions) Len() int {
	if x == nil {
		return 0
	}
	return len(x.pats)
}

// Indexes reports whether x was built from exactly this slice (the same
// array and length), so that a caller can tell a stale index.
func (x *Exclusions) Indexes(pats []Pattern) bool {
	if x.Len() != len(pats) {
		return false
	}
	return len(pats) == 0 || &x.pats[0] == &pats[0]
}

// Match returns the first pattern, in list order, that protects the image.
func (x *Exclusions) Match(img Image) (Pattern, bool) {
	if x.Len() == 0 {
		return Pattern{}, false
	}
	best := len(x.pats)
	if x.all >= 0 {
		best = x.all
	}
	if best == 0 {
		return x.pats[0], true
	}
	hit := func(m map[string]int, k string) {
		if i, ok := m[k]; ok && i < best {
			best = i
		}
	}
	keys, repos := names(img)
	for _, k := range keys {
		hit(x.exact, k)
	}
	forText(img, func(n string) { hit(x.text, n) })
	for _, r := range repos {
		hit(x.repos, r)
		if len(x.under) == 0 {
			continue
		}
		for i := range len(r) {
			if r[i] == '/' {
				hit(x.under, r[:i+1])
			}
		}
	}
	for _, i := range x.prefixes {
		if i >= best {
			break
		}
		if hasPrefix(img, x.pats[i].prefix) {
			best = i
			break
		}
	}
	if len(x.legacy) > 0 && x.legacy[0] < best {
		forms := globForms(img)
		for _, i := range x.legacy {
			if i >= best {
				break
			}
			if x.pats[i].globMatches(forms) {
				best = i
				break
			}
		}
	}
	if best == len(x.pats) {
		return Pattern{}, false
	}
	return x.pats[best], true
}

// hasPrefix says whether any name of the image starts with prefix, as
// upstream tested them: the ID, each tag, each repo digest and its digest.
func hasPrefix(img Image, prefix string) bool {
	if strings.HasPrefix(img.ID, prefix) {
		return true
	}
	for _, t := range img.Tags {
		if strings.HasPrefix(t, prefix) {
			return true
		}
	}
	for _, d := range img.Digests {
		_, dig, _ := strings.Cut(d, "@")
		if strings.HasPrefix(d, prefix) || strings.HasPrefix(dig, prefix) {
			return true
		}
	}
	return false
}

// names parses each of the image's names once into what the patterns look
// at: its keys (as Image.Keys), for exact patterns, and the normalised
// repositories it is known by, for the wildcards.
func names(img Image) (keys, repos []string) {
	if id, ok := parseDigest(img.ID); ok {
		keys = append(keys, id)
	}
	for _, t := range img.Tags {
		if r, tag, ok := splitTagged(t); ok {
			keys, repos = append(keys, r+":"+tag), append(repos, r)
		}
	}
	for _, d := range img.Digests {
		if r, dig, ok := splitDigested(d); ok {
			keys, repos = append(keys, r+"@"+dig, dig), append(repos, r)
		}
	}
	return keys, repos
}
