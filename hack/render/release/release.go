// Package release publishes an Eraser release to an OCI registry: the
// multi-platform images that hack/ocibuild wrote as OCI layouts ("make
// images"), then the Helm chart, stamped with the version and pointing at
// those images, as an OCI artifact. "make release" runs it through
// cmd/release; docs/release.md describes it.
//
// A release is idempotent: a reference that already holds what would be
// pushed is left alone, and one that holds something else is refused
// (a published version does not change) unless Overwrite is set.
package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/provenance"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
	"github.com/eraser-oss/eraser/internal/wire/images"
)

// Image is one of the images a release publishes: its directory under the
// images directory (hack/ocibuild's -images name), its repository under the
// registry, and the platforms its index must hold.
type Image = images.Image

// Images are the images of a release, as hack/ocibuild builds them with
// every platform: internal/wire/images, which names them for every other place
// too (docs/images.md).
var Images = images.All()

// ChartRepo is the chart's repository under the registry.
const ChartRepo = "charts/eraser"

// Annotations hack/ocibuild puts on the index in a layout's index.json.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerName = "io.containerd.image.name"
)

// Options are the inputs of a release.
type Options struct {
	// Registry is where the images and the chart go: a registry host and
	// an optional path, e.g. ghcr.io/owner/eraser.
	Registry string
	// Version is the release, a semantic version without a leading "v":
	// the images' tag, the chart's version and appVersion.
	Version string
	// ImagesDir holds an OCI layout per image (make images: bin/images).
	ImagesDir string
	// ChartDir is the chart's source (charts/eraser).
	ChartDir string
	// Insecure allows plain HTTP, only to a registry on this machine.
	Insecure bool
	// Overwrite replaces a tag that holds other content than this
	// release's; without it, such a tag is an error.
	Overwrite bool
	// Platforms, when set, releases only these platforms of each image
	// (those of its own that are listed; at least one): a partial
	// release, for tests and local use. Empty: every platform, as a
	// release is.
	Platforms []string
	// Epoch is the chart archive's timestamps and its OCI creation time
	// (SOURCE_DATE_EPOCH), so that the same sources give the same digests.
	Epoch time.Time
	// Keychain gives the images' registry credentials; nil is
	// authn.DefaultKeychain (the docker config).
	Keychain authn.Keychain
	// HelmRegistryConfig is Helm's registry credentials file (helm
	// registry login); Helm falls back to the docker config.
	HelmRegistryConfig string
	// Out receives what was pushed; nil discards it.
	Out io.Writer
	// Digests are the images' index digests by repository, which
	// Package pins the chart's images to; Run sets them from the layouts.
	Digests map[string]string
	// Signer, when set, signs every image, its platform images, the
	// commands' artifact and the chart, and attests each image's SBOM and
	// build provenance, as cosign does with a key. A release to a
	// registry that is not on this machine must be signed.
	Signer *Signer
	// HelmSigner, when set, also signs the chart as helm package --sign
	// does: its provenance file, pushed with it, which helm pull --verify
	// and helm verify check against an OpenPGP keyring.
	HelmSigner *provenance.Signatory
	// BuilderID names the builder in the images' provenance; empty:
	// DefaultBuilderID.
	BuilderID string
	// CLI, when set, builds the commands (cmd/eraser, cmd/kubectl-eraser)
	// for the release's platforms and pushes them as
	// REGISTRY/eraser-cli:VERSION; nil leaves them out.
	CLI *CLI
}

// Pushed is one reference of a release and its digest.
type Pushed struct {
	Ref    string
	Digest string
	// Platforms of an image index; empty for the chart.
	Platforms []string
	// Unchanged: the reference already held this digest.
	Unchanged bool
}

// Result is what a release pushed, images first, then the chart.
type Result struct {
	Images []Pushed
	Chart  Pushed
	// CLI is the commands' artifact, and CLIFiles what it holds
	// (the binaries, then SHA256SUMS), when Options.CLI was set.
	CLI      *Pushed
	CLIFiles []string
	Took     time.Duration
}

// Check validates the options that need nothing built: the registry, the
// version and the plain-HTTP rule. Run checks them too; "make release"
// calls it before it spends minutes building images.
func Check(o Options) error {
	if err := checkVersion(o.Version); err != nil {
		return err
	}
	host, err := registryHost(o.Registry)
	if err != nil {
		return err
	}
	if o.Insecure && !endpoint.IsLoopbackHost(host) {
		return fmt.Errorf("--insecure (plain HTTP) is allowed only for a registry on this machine (127.0.0.0/8, localhost, [::1]); %s is not one: push over HTTPS", host)
	}
	if o.Signer == nil && !endpoint.IsLoopbackHost(host) {
		return fmt.Errorf("a release to %s must be signed: give the signing key (make release COSIGN_KEY=cosign.key, its password in COSIGN_PASSWORD; cosign generate-key-pair makes one); only a registry on this machine takes an unsigned release", host)
	}
	for _, im := range Images {
		if _, err := name.NewTag(o.Registry+"/"+im.Repo+":"+o.Version, name.StrictValidation); err != nil {
			return fmt.Errorf("registry %q: %w", o.Registry, err)
		}
		if _, err := imagePlatforms(im, o.Platforms); err != nil {
			return err
		}
	}
	return nil
}

// imagePlatforms are the platforms of im a release with the given subset
// (none: every platform) pushes.
func imagePlatforms(im Image, subset []string) ([]string, error) {
	if len(subset) == 0 {
		return im.Platforms, nil
	}
	known := map[string]bool{}
	for _, i := range Images {
		for _, p := range i.Platforms {
			known[p] = true
		}
	}
	var out []string
	for _, p := range subset {
		if !known[p] {
			return nil, fmt.Errorf("platform %q: an image of a release is built for %s", p, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		if slices.Contains(im.Platforms, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image %s is built for none of the platforms %v (it has %v)", im.Name, subset, im.Platforms)
	}
	return out, nil
}

func checkVersion(v string) error {
	if v == "" {
		return errors.New("no version: set VERSION, e.g. VERSION=1.2.3")
	}
	if strings.HasPrefix(v, "v") {
		return fmt.Errorf("version %q: give it without the leading v (%s), as Helm chart versions are", v, strings.TrimPrefix(v, "v"))
	}
	sv, err := semver.StrictNewVersion(v)
	if err != nil {
		return fmt.Errorf("version %q is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE]): %w", v, err)
	}
	if sv.Metadata() != "" {
		return fmt.Errorf("version %q: build metadata (+...) cannot be an image tag", v)
	}
	return nil
}

// registryHost is the host[:port] that starts a registry path; it must
// look like a host (a dot, a port or localhost), or the clients would take
// the path for a Docker Hub repository.
func registryHost(registry string) (string, error) {
	if registry == "" {
		return "", errors.New("no registry: set REGISTRY, e.g. REGISTRY=ghcr.io/<owner>/eraser")
	}
	if strings.Contains(registry, "://") {
		return "", fmt.Errorf("registry %q: give a host and path, without a scheme", registry)
	}
	host, _, _ := strings.Cut(registry, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return "", fmt.Errorf("registry %q must start with a registry host, e.g. ghcr.io/<owner>/eraser or 127.0.0.1:5000/eraser", registry)
	}
	return host, nil
}

// loopbackOnlyHTTP refuses any plain-HTTP request to a host other than this
// machine, whatever a client library decides about schemes (go-
// containerregistry, for one, falls back to HTTP for private addresses).
type loopbackOnlyHTTP struct{ next http.RoundTripper }

func (t loopbackOnlyHTTP) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "http" && !endpoint.IsLoopbackHost(r.URL.Host) {
		return nil, fmt.Errorf("refusing plain HTTP to %s: only a registry on this machine may be reached without TLS", r.URL.Host)
	}
	return t.next.RoundTrip(r)
}

// Run publishes the release: every image of Images, the commands when
// Options.CLI is set, then the chart.
func Run(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if err := Check(o); err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	res := &Result{}

	// Every layout is read and checked before anything is pushed: a
	// release is all four images or none.
	type local struct {
		im  Image
		tag name.Tag
		idx v1.ImageIndex
	}
	var locals []local
	var nameOpts []name.Option
	if o.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	for _, im := range Images {
		ref := o.Registry + "/" + im.Repo + ":" + o.Version
		tag, err := name.NewTag(ref, append([]name.Option{name.StrictValidation}, nameOpts...)...)
		if err != nil {
			return nil, err
		}
		if im.Platforms, err = imagePlatforms(im, o.Platforms); err != nil {
			return nil, err
		}
		idx, err := readLayout(filepath.Join(o.ImagesDir, im.Name), im, ref, o.Version)
		if err != nil {
			return nil, err
		}
		locals = append(locals, local{im, tag, idx})
	}

	// So is the chart, packaged before any push, pinned to the images'
	// digests.
	o.Digests = map[string]string{}
	for _, l := range locals {
		dig, err := l.idx.Digest()
		if err != nil {
			return nil, err
		}
		o.Digests[l.im.Repo] = dig.String()
	}
	chartData, err := Package(o.ChartDir, o)
	if err != nil {
		return nil, err
	}

	// And the commands, built before any push: a release whose
	// commands do not build publishes nothing.
	var cliImage v1.Image
	var cliTag name.Tag
	if o.CLI != nil {
		if cliTag, err = name.NewTag(o.Registry+"/"+CLIRepo+":"+o.Version, append([]name.Option{name.StrictValidation}, nameOpts...)...); err != nil {
			return nil, err
		}
		if res.CLIFiles, err = BuildCLI(ctx, *o.CLI, o.Version, cliPlatforms(o.Platforms)); err != nil {
			return nil, err
		}
		if cliImage, err = cliArtifact(res.CLIFiles); err != nil {
			return nil, fmt.Errorf("the commands' artifact: %w", err)
		}
	}

	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(o.Keychain),
		remote.WithTransport(loopbackOnlyHTTP{remote.DefaultTransport}),
		remote.WithUserAgent("eraser-release"),
	}
	for _, l := range locals {
		p, err := pushIndex(l.tag, l.idx, o.Overwrite, ropts)
		if err != nil {
			return nil, err
		}
		p.Platforms = l.im.Platforms
		res.Images = append(res.Images, p)
		fmt.Fprintf(o.Out, "%-9s %s@%s (%s)\n", state(p), p.Ref, p.Digest, strings.Join(p.Platforms, ", "))
		if o.Signer != nil {
			changed, err := signImage(o, l.tag, l.idx, ropts)
			if err != nil {
				return nil, fmt.Errorf("signing %s: %w", l.tag, err)
			}
			fmt.Fprintf(o.Out, "%-9s %s@%s (signatures, SBOM, provenance)\n", signState(changed), p.Ref, p.Digest)
		}
	}

	if cliImage != nil {
		p, err := pushImage(cliTag, cliImage, o.Overwrite, ropts)
		if err != nil {
			return nil, err
		}
		res.CLI = &p
		var names []string
		for _, f := range res.CLIFiles {
			names = append(names, filepath.Base(f))
		}
		fmt.Fprintf(o.Out, "%-9s %s@%s (%s; files in %s)\n", state(p), p.Ref, p.Digest, strings.Join(names, ", "), o.CLI.Out)
		if o.Signer != nil {
			changed, err := signManifest(o.Signer, cliTag.Context(), p.Digest, ropts)
			if err != nil {
				return nil, fmt.Errorf("signing %s: %w", cliTag, err)
			}
			fmt.Fprintf(o.Out, "%-9s %s@%s (signature)\n", signState(changed), p.Ref, p.Digest)
		}
	}

	chart, err := pushChart(o, chartData)
	if err != nil {
		return nil, err
	}
	res.Chart = chart
	fmt.Fprintf(o.Out, "%-9s oci://%s@%s (chart %s)\n", state(chart), chart.Ref, chart.Digest, o.Version)
	if o.Signer != nil {
		chartTag, err := name.NewTag(chart.Ref, append([]name.Option{name.StrictValidation}, nameOpts...)...)
		if err != nil {
			return nil, err
		}
		changed, err := signManifest(o.Signer, chartTag.Context(), chart.Digest, ropts)
		if err != nil {
			return nil, fmt.Errorf("signing oci://%s: %w", chart.Ref, err)
		}
		fmt.Fprintf(o.Out, "%-9s oci://%s@%s (signature)\n", signState(changed), chart.Ref, chart.Digest)
	}
	res.Took = time.Since(start)
	refs := len(res.Images) + 1
	if res.CLI != nil {
		refs++
	}
	fmt.Fprintf(o.Out, "release %s to %s: %d references in %s\n", o.Version, o.Registry, refs, res.Took.Round(10*time.Millisecond))
	return res, nil
}

func signState(changed bool) string {
	if changed {
		return "signed"
	}
	return "unchanged"
}

func state(p Pushed) string {
	if p.Unchanged {
		return "unchanged"
	}
	return "pushed"
}
