// Package imageref decides which of a node's images an ImageList entry or an
// exclusion pattern names. Users write references in many forms ("alpine",
// "alpine:3.19", "docker.io/library/alpine:3.19", "repo@sha256:...", a bare
// "sha256:..." digest, an image ID); the runtime reports fully qualified tags
// and repo digests. Both sides are normalised the same way before comparing.
package imageref

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// Image is what the runtime reports of one image.
type Image struct {
	// ID is the image ID, "sha256:<hex>" (the config digest on containerd).
	ID string
	// Tags are the repo tags, e.g. "docker.io/library/alpine:3.19".
	Tags []string
	// Digests are the repo digests, e.g. "docker.io/library/alpine@sha256:...".
	Digests []string
}

// Kind is what an entry names.
type Kind int

const (
	// KindDigest is a bare "sha256:<hex>" or 64-hex string: an image ID, or
	// the digest part of a repo digest.
	KindDigest Kind = iota + 1
	// KindTagged is a repository and tag; the tag defaults to "latest".
	KindTagged
	// KindDigested is "repository@sha256:<hex>".
	KindDigested
)

// Ref is a parsed ImageList entry.
type Ref struct {
	Kind Kind
	// Repo is the normalised repository ("docker.io/library/alpine");
	// empty for KindDigest.
	Repo string
	// Tag is set for KindTagged.
	Tag string
	// Digest is "sha256:<hex>" for KindDigest and KindDigested.
	Digest string
}

var hex64 = regexp.MustCompile(`^[a-f0-9]{64}$`)

// MaxLength bounds an entry, as the ImageList schema does.
const MaxLength = 512

// PruneAllEntry, as an ImageList entry, selects every unused image.
const PruneAllEntry = "*"

// ErrPruneAll is returned for "*", which is not a reference: callers handle it.
var ErrPruneAll = errors.New(`"*" selects every unused image; it is not a reference`)

// Parse reads one ImageList entry.
func Parse(s string) (Ref, error) {
	switch {
	case s == PruneAllEntry:
		return Ref{}, ErrPruneAll
	case s == "":
		return Ref{}, errors.New("empty image reference")
	case len(s) > MaxLength:
		return Ref{}, fmt.Errorf("image reference longer than %d bytes", MaxLength)
	case strings.ContainsAny(s, " \t\r\n"):
		return Ref{}, fmt.Errorf("%q: image references contain no spaces", s)
	}
	if d, ok := parseDigest(s); ok {
		return Ref{Kind: KindDigest, Digest: d}, nil
	}
	if strings.HasPrefix(s, "sha256:") {
		return Ref{}, fmt.Errorf("%q: a digest is sha256: followed by 64 lowercase hex digits", s)
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return Ref{}, fmt.Errorf("%q is not an image reference: %w", s, err)
	}
	if d, ok := named.(reference.Digested); ok {
		return Ref{Kind: KindDigested, Repo: named.Name(), Digest: d.Digest().String()}, nil
	}
	tag := "latest"
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return Ref{Kind: KindTagged, Repo: named.Name(), Tag: tag}, nil
}

// String is the normalised form of the reference.
func (r Ref) String() string {
	switch r.Kind {
	case KindDigest:
		return r.Digest
	case KindDigested:
		return r.Repo + "@" + r.Digest
	default:
		return r.Repo + ":" + r.Tag
	}
}

// parseDigest accepts "sha256:<64 hex>" and a bare 64-hex image ID.
func parseDigest(s string) (string, bool) {
	hex := strings.TrimPrefix(s, "sha256:")
	if !hex64.MatchString(hex) {
		return "", false
	}
	return "sha256:" + hex, true
}

// Matches reports whether the reference names the image.
func (r Ref) Matches(img Image) bool {
	return slices.Contains(img.Keys(), r.String())
}

// Keys are the normal forms the image can be named by: its ID, each tag, each
// repo digest and the digest part of each. A Ref names the image exactly when
// its String is one of them, so callers can index images by key once and look
// references up in a map.
func (img Image) Keys() []string {
	keys := make([]string, 0, 1+len(img.Tags)+2*len(img.Digests))
	if id, ok := parseDigest(img.ID); ok {
		keys = append(keys, id)
	}
	for _, t := range img.Tags {
		if repo, tag, ok := splitTagged(t); ok {
			keys = append(keys, repo+":"+tag)
		}
	}
	for _, d := range img.Digests {
		if repo, dig, ok := splitDigested(d); ok {
			keys = append(keys, repo+"@"+dig, dig)
		}
	}
	return keys
}

// splitTagged normalises a runtime-reported tag into repository and tag.
func splitTagged(s string) (repo, tag string, ok bool) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", "", false
	}
	t, ok := named.(reference.Tagged)
	if !ok {
		return "", "", false
	}
	return named.Name(), t.Tag(), true
}

// splitDigested normalises a runtime-reported repo digest.
func splitDigested(s string) (repo, digest string, ok bool) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return "", "", false
	}
	d, ok := named.(reference.Digested)
	if !ok {
		return "", "", false
	}
	return named.Name(), d.Digest().String(), true
}
