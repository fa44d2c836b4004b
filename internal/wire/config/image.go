package config

import (
	"fmt"
	"strings"
)

// ParseImage splits an image reference into repository and tag, keeping a
// digest with the repository ("repo@sha256:..." has no tag).
//
// A reference without a repository (":v1", "@sha256:...") or with an empty
// tag ("repo:") is refused: the worker pods would otherwise run another
// image than the one named, or fail on every node.
func ParseImage(ref string) (Image, error) {
	invalid := func(why string) (Image, error) {
		return Image{}, fmt.Errorf("%q is not an image reference: %s", ref, why)
	}
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return invalid("empty or has spaces")
	}
	if at := strings.Index(ref, "@"); at >= 0 {
		if at == 0 {
			return invalid("no repository before the digest")
		}
		return Image{Repo: ref}, nil
	}
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		switch {
		case colon == 0:
			return invalid("no repository before the tag")
		case colon == len(ref)-1:
			return invalid("empty tag")
		}
		return Image{Repo: ref[:colon], Tag: ref[colon+1:]}, nil
	}
	return Image{Repo: ref}, nil
}
