package imageref

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"
)

// Pattern is one entry of an exclusion list. Upstream's forms are kept:
//
//   - an exact reference, digest or image ID, matched as an ImageList entry is;
//   - "registry/path/*": every image whose repository is under that path;
//   - "repo:*": every tag and digest of that repository (also for registries
//     with a port, which upstream got wrong);
//   - "*": every image. Upstream silently ignored a lone "*"; an exclusion
//     list exists to protect, so here it protects everything.
//
// Upstream matched the two wildcard forms as string prefixes of the names
// the runtime reports (the text before "*" for "path/*", before the first
// ":" for "repo:*"), so "docker.io/library/nginx:*" also caught
// "docker.io/library/nginx-exporter". A pattern here protects at least what
// upstream's did (those prefixes as well as the repositories above), except
// that "host:port/repo:*" is this repository's, not every image of host.
//
// Any other use of "*" is an error rather than a pattern that never matches.
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
}

// ParsePattern reads one exclusion entry.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{raw: s}
	switch {
	case s == "*":
		p.all = true
		return p, nil
	case strings.HasSuffix(s, "/*"):
		prefix := strings.TrimSuffix(s, "/*")
		if prefix == "" || strings.Contains(prefix, "*") {
			return p, fmt.Errorf("exclusion %q: want registry/path/*", s)
		}
		under, err := normalisePath(prefix)
		if err != nil {
			return p, fmt.Errorf("exclusion %q: %w", s, err)
		}
		p.under = under + "/"
		p.prefix = strings.TrimSuffix(s, "*")
		return p, nil
	case strings.HasSuffix(s, ":*"):
		repo := strings.TrimSuffix(s, ":*")
		if strings.Contains(repo, "*") {
			return p, fmt.Errorf("exclusion %q: want repository:*", s)
		}
		named, err := reference.ParseNormalizedNamed(repo)
		if err != nil || !reference.IsNameOnly(named) {
			return p, fmt.Errorf("exclusion %q: %q is not a repository", s, repo)
		}
		p.repo = named.Name()
		if before, after, _ := strings.Cut(s, ":"); strings.Contains(before, "/") || !strings.Contains(after, "/") {
			// Upstream's prefix, where its first ":" is the tag's. Before
			// a port it was the bare host, every image of the registry:
			// a bug, not a meaning anyone wrote.
			p.prefix = before
		}
		return p, nil
	case strings.Contains(s, "*"):
		return p, fmt.Errorf("exclusion %q: wildcards are allowed only as registry/path/*, repository:* or *", s)
	}
	r, err := Parse(s)
	if err != nil {
		return p, fmt.Errorf("exclusion %q: %w", s, err)
	}
	p.ref = &r
	return p, nil
}

// normalisePath turns "docker.io/library", "library", "quay.io",
// "localhost:5000/team" or "team" into the normalised repository prefix they
// denote, by normalising a repository just below it.
func normalisePath(prefix string) (string, error) {
	if prefix == "docker.io" || prefix == "index.docker.io" {
		// Below, "docker.io/x" would normalise to "docker.io/library/x".
		return "docker.io", nil
	}
	named, err := reference.ParseNormalizedNamed(prefix + "/x")
	if err != nil {
		return "", fmt.Errorf("%q is not a registry or repository path", prefix)
	}
	return strings.TrimSuffix(named.Name(), "/x"), nil
}

// String is the pattern as written.
func (p Pattern) String() string { return p.raw }
