package config

import (
	"fmt"
	"strings"
)

// ParseImage splits an image reference into repository and tag, keeping a
// digest with the repository ("repo@sha256:..." has no tag).
func ParseImage(ref string) (Image, error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return Image{}, fmt.Errorf("%q is not an image reference", ref)
	}
	if strings.Contains(ref, "@") {
		return Image{Repo: ref}, nil
	}
	slash := strings.LastIndex(ref, "/")
	if colon := strings.LastIndex(ref, ":"); colon > slash {
		return Image{Repo: ref[:colon], Tag: ref[colon+1:]}, nil
	}
	return Image{Repo: ref}, nil
}
