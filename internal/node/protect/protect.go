// Package protect answers whether an image may go: it holds every rule
// that keeps an image on a node, as one ordered chain (Chain; docs/protection.md
// lists it): images any container uses or mounts as an image volume
// (in any state), images the runtime pins, the runtime's sandbox (pause)
// image or, when no source names it, what looks like one, images an
// exclusion list protects; then, from the automatic policies only, images
// no registry can give back, images the cluster's pods and workloads
// reference (or any image, when the references are incomplete), and images
// too young. The first rule that keeps an image names the outcome the node
// reports. What the chain leaves, the retention policy chooses among
// (internal/node/retention), and the remover asks UsedNow again right
// before each removal. The remover, the collector and reclaim ask these
// rules; nothing else decides that an image stays. The container runtime
// enforces none of it: containerd removes images that running containers
// use, and pinned ones too.
package protect

import (
	"strings"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Removable is the reason of a Decision when no rule keeps the image.
const Removable workerresult.Outcome = ""

// Decision is whether the chain keeps one image, and which rule does.
type Decision struct {
	// Reason says why the image is kept: the outcome the node's summary
	// counts and its report and logs print.
	Reason workerresult.Outcome
	// Detail names the container, the sandbox image, the pattern, the
	// workload or the age.
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

// Containers indexes what the node's containers need, by every key of
// each image, to the container's name. A container names its own image
// three ways (the spec's image, ImageRef, ImageID); all are indexed, so a
// container started from an image ID still protects the image after its
// tag moved. The zero value knows no container.
type Containers struct {
	// images are the containers' own images.
	images map[string]string
	// mounts are the images containers mount as image volumes.
	mounts map[string]string
}

// NewContainers indexes the images of all containers, whatever their state:
// their own images and the images they mount as image volumes, which the
// container needs as much (a removed one breaks the pod's restart, and a
// runtime may drop content under the mount).
func NewContainers(containers []cri.Container) Containers {
	used := Containers{images: map[string]string{}, mounts: map[string]string{}}
	for _, c := range containers {
		name := c.Name
		if name == "" {
			name = c.ID
		}
		for _, s := range []string{c.ImageID, c.ImageRef, c.Image} {
			for _, k := range refKeys(s) {
				used.images[k] = name
			}
		}
		for _, s := range c.MountedImages {
			for _, k := range refKeys(s) {
				used.mounts[k] = name
			}
		}
	}
	return used
}

// Listed reports whether the index was made from a container listing.
func (c Containers) Listed() bool { return c.images != nil }

// UseAny reports whether a container uses or mounts an image with any of
// these keys.
func (c Containers) UseAny(keys []string) bool {
	for _, k := range keys {
		if _, ok := c.images[k]; ok {
			return true
		}
		if _, ok := c.mounts[k]; ok {
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

// Check applies the rules that keep an image from every removal (an
// ImageList naming it too) to one image, given its Keys.
func (p Policy) Check(img cri.Image, keys []string, used Containers) Decision {
	return Judge(&Subject{Image: img, Keys: keys, Used: used, Policy: p}, Always)
}

// excludes is the exclusion pattern that protects the image, if any.
func (p Policy) excludes(img cri.Image) (imageref.Pattern, bool) {
	if len(p.Exclusions) == 0 {
		return imageref.Pattern{}, false
	}
	excluded := p.excluded
	if !excluded.Indexes(p.Exclusions) {
		// Not prepared, or changed since: correct, but indexed per call.
		excluded = imageref.NewExclusions(p.Exclusions)
	}
	return excluded.Match(imageref.Image{ID: img.ID, Tags: img.Tags, Digests: img.Digests})
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
