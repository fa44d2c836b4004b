// Package images names the project's container images once. hack/ocibuild
// builds them under these repositories, hack/render/release pushes them
// there, internal/wire/config's defaults name them from here, and every other
// place that names an image (the chart's values and helpers, the
// manifests, docs/images.md) is checked against this list by
// hack/render/release's tests, so that what a release pushes is what an
// install pulls.
package images

// Image is one published image.
type Image struct {
	// Name selects it in make images IMAGES=... and names its outputs
	// under bin/images.
	Name string
	// Repo is its repository under a registry path: version.DefaultRepo,
	// make release's REGISTRY, or the chart's imageRegistry.
	Repo string
	// Platforms its multi-platform index holds, os/arch.
	Platforms []string
}

var (
	linux = []string{"linux/amd64", "linux/arm64"}
	// The node workers also run as HostProcess pods on Windows nodes.
	linuxWindows = []string{"linux/amd64", "linux/arm64", "windows/amd64"}
)

// The images, by role. Their repositories are upstream's names, so that
// a values file or overlay that names upstream's images by repository
// maps onto ours by changing only the registry.
var (
	Manager   = Image{Name: "manager", Repo: "eraser-manager", Platforms: linux}
	Collector = Image{Name: "collector", Repo: "collector", Platforms: linuxWindows}
	Remover   = Image{Name: "remover", Repo: "remover", Platforms: linuxWindows}
	Scanner   = Image{Name: "trivy-scanner", Repo: "eraser-trivy-scanner", Platforms: linux}
)

// All are the images of a release, in the order they are built and pushed.
// Each call returns a fresh copy, so a caller may narrow its platforms.
func All() []Image {
	out := []Image{Manager, Collector, Remover, Scanner}
	for i := range out {
		out[i].Platforms = append([]string(nil), out[i].Platforms...)
	}
	return out
}

// Ref is the image's reference under registry (a host and optional path)
// at tag.
func (im Image) Ref(registry, tag string) string {
	return registry + "/" + im.Repo + ":" + tag
}
