package imageref

import "strings"

// This is the matcher as it was before Exclusions indexed the patterns,
// kept as the reference the index is tested against: every pattern in list
// order, each re-reading the image's names.

// linearMatch returns the first pattern that matches, trying each in turn.
func linearMatch(pats []Pattern, img Image) (Pattern, bool) {
	for _, p := range pats {
		if p.linearMatches(img) {
			return p, true
		}
	}
	return Pattern{}, false
}

// linearMatches reports whether the pattern protects the image.
func (p Pattern) linearMatches(img Image) bool {
	switch {
	case p.all:
		return true
	case p.ref != nil && p.ref.Matches(img):
		return true
	}
	if p.prefix != "" && hasPrefix(img, p.prefix) {
		return true
	}
	if p.globMatches(globForms(img)) {
		return true
	}
	if p.ref != nil || p.literal {
		matched := false
		forText(img, func(n string) { matched = matched || n == p.raw })
		if matched {
			return true
		}
	}
	for _, repo := range linearRepositories(img) {
		if p.repo != "" && repo == p.repo {
			return true
		}
		if p.under != "" && strings.HasPrefix(repo, p.under) {
			return true
		}
	}
	return false
}

// linearRepositories lists the normalised repositories an image is known by.
func linearRepositories(img Image) []string {
	var out []string
	for _, t := range img.Tags {
		if repo, _, ok := splitTagged(t); ok {
			out = append(out, repo)
		}
	}
	for _, d := range img.Digests {
		if repo, _, ok := splitDigested(d); ok {
			out = append(out, repo)
		}
	}
	return out
}
