// Package protect decides which images on a node must never be removed:
// images any container uses (in any state), images the runtime pins, the
// runtime's sandbox (pause) image, and images an exclusion list protects.
// The container runtime enforces none of this: containerd removes images
// that running containers use, and pinned ones too.
package protect

import (
	"slices"
	"strings"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// Reason says why an image is kept; Removable means it is not protected.
type Reason string

// The reasons, in the order they are checked.
const (
	Removable Reason = ""
	InUse     Reason = "in use"
	Pinned    Reason = "pinned"
	Excluded  Reason = "excluded"
	// Referenced images are named by a pod or workload template the
	// cluster has (internal/wire/references); only the automatic policies
	// keep them, so they are judged by the remover's plan, not by Check.
	Referenced Reason = "referenced"
	// NotRepullable images were not pulled from a registry (imported,
	// built, side-loaded): once removed, nothing brings them back.
	NotRepullable Reason = "not re-pullable"
)

// Verdict is the decision for one image.
type Verdict struct {
	Reason Reason
	// Detail names the container, the sandbox image or the pattern.
	Detail string
}

// Keys are the normalised names of a runtime image, plus the raw strings the
// runtime reported: a raw match can only add protection, never remove it.
func Keys(img cri.Image) []string {
	keys := imageref.Image{ID: img.ID, Tags: img.Tags, Digests: img.Digests}.Keys()
	keys = append(keys, img.ID)
	keys = append(keys, img.Tags...)
	keys = append(keys, img.Digests...)
	return keys
}

// RefKeys are the keys one image string a container, pod or template
// reports can match: the string itself, without a docker-era scheme, and
// its normalised form ("nginx" is docker.io/library/nginx:latest).
func RefKeys(s string) []string { return refKeys(s) }

// refKeys are the keys one container-reported image string can match.
func refKeys(s string) []string {
	if s == "" {
		return nil
	}
	keys := []string{s}
	// Docker-era runtimes and kubelets report "docker-pullable://repo@sha256:…"
	// and "docker://sha256:…": the scheme is not part of the reference.
	if _, rest, ok := strings.Cut(s, "://"); ok && rest != "" {
		s = rest
		keys = append(keys, s)
	}
	if r, err := imageref.Parse(s); err == nil {
		keys = append(keys, r.String())
	}
	return keys
}

// Containers maps every key of every image a container refers to, to that
// container's name. A container names its image three ways (the spec's
// image, ImageRef, ImageID); all are indexed, so a container started from
// an image ID still protects the image after its tag moved.
type Containers map[string]string

// NewContainers indexes the images of all containers, whatever their state.
func NewContainers(containers []cri.Container) Containers {
	used := Containers{}
	for _, c := range containers {
		name := c.Name
		if name == "" {
			name = c.ID
		}
		for _, s := range []string{c.ImageID, c.ImageRef, c.Image} {
			for _, k := range refKeys(s) {
				used[k] = name
			}
		}
	}
	return used
}

// UseAny reports whether a container uses an image with any of these keys.
func (c Containers) UseAny(keys []string) bool {
	for _, k := range keys {
		if _, ok := c[k]; ok {
			return true
		}
	}
	return false
}

// Policy is what protects images besides containers.
type Policy struct {
	// Exclusions come from the exclusion lists.
	Exclusions []imageref.Pattern
	// excluded indexes Exclusions (Prepare).
	excluded *imageref.Exclusions
	// SandboxImage is the runtime's pause image, as its status reports it.
	SandboxImage string
	// SandboxImages are the images of the node's pod sandboxes, as the
	// runtime reports each sandbox: a runtime whose status names no sandbox
	// image, or pods started before its configuration changed, still show
	// which pause images are needed.
	SandboxImages []string
	// GuessPause keeps every image that looks like a pause image, when
	// neither source named one: removing it would break every new pod.
	GuessPause bool
}

// guessDetail explains a guessed sandbox image.
const guessDetail = "looks like a pause image (the runtime named no sandbox image)"

// Prepare indexes the exclusions for judging many images: call it once per
// run, before the Checks. Exclusions must not change afterwards; a Check
// that finds them changed indexes them again.
func (p Policy) Prepare() Policy {
	p.excluded = imageref.NewExclusions(p.Exclusions)
	return p
}

// Check decides for one image, given its Keys.
func (p Policy) Check(img cri.Image, keys []string, used Containers) Verdict {
	for _, k := range keys {
		if c, ok := used[k]; ok {
			return Verdict{Reason: InUse, Detail: "container " + c}
		}
	}
	if img.Pinned {
		return Verdict{Reason: Pinned, Detail: "pinned by the runtime"}
	}
	for _, k := range refKeys(p.SandboxImage) {
		if slices.Contains(keys, k) {
			return Verdict{Reason: Pinned, Detail: "the runtime's sandbox image"}
		}
	}
	for _, s := range p.SandboxImages {
		for _, k := range refKeys(s) {
			if slices.Contains(keys, k) {
				return Verdict{Reason: Pinned, Detail: "a pod sandbox's image"}
			}
		}
	}
	if p.GuessPause && LooksLikePause(img) {
		return Verdict{Reason: Pinned, Detail: guessDetail}
	}
	if len(p.Exclusions) == 0 {
		return Verdict{}
	}
	excluded := p.excluded
	if !excluded.Indexes(p.Exclusions) {
		// Not prepared, or changed since: correct, but indexed per call.
		excluded = imageref.NewExclusions(p.Exclusions)
	}
	if pat, ok := excluded.Match(imageref.Image{ID: img.ID, Tags: img.Tags, Digests: img.Digests}); ok {
		return Verdict{Reason: Excluded, Detail: "exclusion " + pat.String()}
	}
	return Verdict{}
}

// LooksLikePause reports whether any name of the image has a repository
// whose last path component contains "pause" (registry.k8s.io/pause,
// k8s.gcr.io/pause-amd64, Bottlerocket's localhost/kubernetes/pause).
func LooksLikePause(img cri.Image) bool {
	for _, name := range append(append([]string{}, img.Tags...), img.Digests...) {
		repo := name
		if r, err := imageref.Parse(name); err == nil {
			repo = r.Repo
		} else if i := strings.IndexAny(repo, "@:"); i >= 0 && !strings.Contains(repo[i:], "/") {
			repo = repo[:i]
		}
		if strings.Contains(repo[strings.LastIndex(repo, "/")+1:], "pause") {
			return true
		}
	}
	return false
}

// CannotPullBack reports whether an image is one that a pod can still ask
// for by name and no registry can give back: it has a name, and no
// repository digest on a registry other than "localhost" (podman's and
// Bottlerocket's name for images never pushed anywhere). containerd records
// a repository digest only for a pull; an image imported with "ctr images
// import" or built on the node has tags and an ID alone. CRI-O makes up a
// repository digest for every tag and its image store records no pull
// either (docs/protection.md): there only "localhost/" images are told
// apart. An image with no name at all (a tag moved away from it) is not
// kept: nothing can ask for it by name, and a pod that names it by ID is a
// reference.
func CannotPullBack(img cri.Image) bool {
	if len(img.Tags) == 0 && len(img.Digests) == 0 {
		return false
	}
	for _, d := range img.Digests {
		name := d
		if i := strings.IndexByte(name, '@'); i >= 0 {
			name = name[:i]
		}
		if host, _, ok := strings.Cut(name, "/"); !ok || host != "localhost" {
			return false
		}
	}
	return true
}
