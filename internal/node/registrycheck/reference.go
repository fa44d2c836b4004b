package registrycheck

import (
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// Docker Hub's names: images name it docker.io (or index.docker.io, as
// older clients wrote it), its API answers at registry-1.docker.io, and
// docker config.json files key its credentials by its v1 index URL.
const (
	dockerHub    = "docker.io"
	dockerHubAPI = "registry-1.docker.io"
)

// Content is one image's content at one repository: what is asked.
type Content struct {
	// Host is the registry's host as images name it (docker.io, not its
	// API host), with its port if any.
	Host string
	// Name is the repository within it (library/nginx).
	Name string
	// Digest is the manifest's digest (sha256:...).
	Digest string
}

// String is the content as a reference: host/name@digest.
func (c Content) String() string { return c.Host + "/" + c.Name + "@" + c.Digest }

// ParseRepoDigest reads a repo digest as a runtime records it
// (docker.io/library/nginx@sha256:..., or nginx@sha256:...), normalised as
// the runtime pulled it.
func ParseRepoDigest(s string) (Content, bool) {
	repo, dg, ok := strings.Cut(s, "@")
	if !ok {
		return Content{}, false
	}
	if _, err := digest.Parse(dg); err != nil {
		return Content{}, false
	}
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return Content{}, false
	}
	if _, tagged := named.(reference.Tagged); tagged {
		return Content{}, false
	}
	host := reference.Domain(named)
	if host == "index.docker.io" {
		host = dockerHub
	}
	return Content{Host: host, Name: reference.Path(named), Digest: dg}, true
}

// repository is a tag's repository, normalised: docker.io/library/nginx.
func repository(tag string) string {
	named, err := reference.ParseNormalizedNamed(tag)
	if err != nil {
		return ""
	}
	c := Content{Host: reference.Domain(named), Name: reference.Path(named)}
	if c.Host == "index.docker.io" {
		c.Host = dockerHub
	}
	return c.Host + "/" + c.Name
}

// Pick chooses the content to ask about among an image's repo digests:
// the one of the repository its first tag names when there is one (the
// name workloads pull it by), else the first that parses. ok is false
// when the image has no repo digest: nothing to ask a registry about.
func Pick(tags, digests []string) (Content, bool) {
	var parsed []Content
	for _, d := range digests {
		if c, ok := ParseRepoDigest(d); ok {
			parsed = append(parsed, c)
		}
	}
	if len(parsed) == 0 {
		return Content{}, false
	}
	for _, t := range tags {
		repo := repository(t)
		for _, c := range parsed {
			if c.Host+"/"+c.Name == repo {
				return c, true
			}
		}
	}
	return parsed[0], true
}

// apiHost is the host a registry's API answers at.
func apiHost(host string) string {
	if host == dockerHub {
		return dockerHubAPI
	}
	return host
}
