// Command ocibuild builds Eraser's container images without a container
// engine: it cross-compiles each component into a static binary, puts it in
// a single layer on an empty base, and writes per image an OCI image layout
// holding a multi-platform index, plus per image and platform a
// docker-archive tarball that "ctr images import" and "docker load" accept.
//
// The output is reproducible: every timestamp is SOURCE_DATE_EPOCH (0 when
// unset), so the same sources and toolchain give the same digests.
//
// Run it through "make images"; docs/images.md describes the images.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/process/version"
	"github.com/eraser-oss/eraser/internal/wire/images"
)

// sourceURL is what the images' org.opencontainers.image.source label says.
const sourceURL = "https://github.com/eraser-oss/eraser"

// platform is an OS and CPU architecture pair, as GOOS and GOARCH spell them.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "/" + p.Arch }

var (
	linuxAMD64   = platform{"linux", "amd64"}
	linuxARM64   = platform{"linux", "arm64"}
	windowsAMD64 = platform{"windows", "amd64"}
)

// component is one image: a Go main package, where it comes from, and how
// its container runs.
type component struct {
	// Name selects the image in -images and names its outputs.
	Name string
	// Repo is the image repository under the registry.
	Repo string
	// Module is the directory of the Go module the package belongs to,
	// relative to the repository root.
	Module string
	// Package is the main package, relative to Module; its last element
	// names the binary.
	Package string
	// Platforms are the platforms the image is built for.
	Platforms []platform
	// User is the Linux user the container runs as, "uid:gid".
	User string
	// WorkDir is the Linux working directory, created in the layer.
	WorkDir string
	// BuildEnv is added to the environment of go build.
	BuildEnv []string
	// Optional components are skipped, with a note, while their package
	// has no Go files yet.
	Optional bool
}

// platformsOf are im's platforms, as this builder spells them.
func platformsOf(im images.Image) []platform {
	var out []platform
	for _, p := range im.Platforms {
		goos, arch, _ := strings.Cut(p, "/")
		out = append(out, platform{goos, arch})
	}
	return out
}

// catalog is every image the project publishes, named and placed by
// internal/wire/images (which the release and the chart's tests share). The manager runs as the
// unprivileged 65532 (the distroless "nonroot" user); the node workers run
// as root because the runtime's socket is root's, and on Windows as SYSTEM
// in HostProcess pods.
var catalog = []component{
	{
		Name: images.Manager.Name, Repo: images.Manager.Repo, Module: ".", Package: "./cmd/manager",
		Platforms: platformsOf(images.Manager), User: "65532:65532", WorkDir: "/",
	},
	{
		Name: images.Collector.Name, Repo: images.Collector.Repo, Module: ".", Package: "./cmd/collector",
		Platforms: platformsOf(images.Collector), User: "0:0", WorkDir: "/",
	},
	{
		Name: images.Remover.Name, Repo: images.Remover.Repo, Module: ".", Package: "./cmd/remover",
		Platforms: platformsOf(images.Remover), User: "0:0", WorkDir: "/",
	},
	{
		// Its own module, so that Trivy's dependencies never pin the
		// operator's; Trivy needs encoding/json/v2. The working directory
		// is upstream's, where Trivy keeps its cache by default.
		Name: images.Scanner.Name, Repo: images.Scanner.Repo, Module: "scanner/trivy", Package: "./cmd/trivy-scanner",
		Platforms: platformsOf(images.Scanner), User: "0:0", WorkDir: "/var/lib/trivy",
		BuildEnv: []string{"GOEXPERIMENT=jsonv2"}, Optional: true,
	},
}

// options are the inputs shared by every image of a run.
type options struct {
	// Root is the repository root; Out the output directory.
	Root, Out string
	// Registry is the registry path the repositories live under.
	Registry string
	// Version tags the images and is stamped into the binaries; Revision
	// is the source commit.
	Version, Revision string
	// Tags and LDFlags are passed to go build (the -X stamps are added).
	Tags, LDFlags string
	// CACerts is the CA bundle put in the Linux images: a file, "none",
	// or empty for the build host's (findCABundle).
	CACerts string
	// Epoch is every timestamp in the images.
	Epoch time.Time
	// Log receives progress.
	Log func(format string, args ...any)
}

func main() {
	o := options{Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, "ocibuild: "+format+"\n", args...) }}
	var all []string
	for _, c := range catalog {
		all = append(all, c.Name)
	}
	images := flag.String("images", strings.Join(all, " "), "images to build, separated by spaces or commas")
	platforms := flag.String("platforms", "linux/amd64 linux/arm64 windows/amd64", "platforms to build, separated by spaces or commas; each image gets those it supports")
	flag.StringVar(&o.Out, "out", "bin/images", "output directory")
	flag.StringVar(&o.Registry, "registry", "", "registry path of the image repositories, and of the workers the manager defaults to (default: "+version.DefaultRepo+")")
	flag.StringVar(&o.Version, "version", "", "image tag and stamped version (default: internal/process/version.Version, "+version.Version+")")
	flag.StringVar(&o.Revision, "revision", "", "source revision for the label and the binaries (default: git rev-parse HEAD)")
	flag.StringVar(&o.Tags, "tags", "", "go build -tags")
	flag.StringVar(&o.LDFlags, "ldflags", "", "go build -ldflags, before the version stamps")
	flag.StringVar(&o.CACerts, "ca-certs", "", "CA bundle copied into the Linux images; empty: the build host's (Debian, Ubuntu, Alpine, Fedora, RHEL, openSUSE or macOS locations); \""+caBundleNone+"\": none")
	flag.Parse()

	if err := run(&o, *images, *platforms); err != nil {
		fmt.Fprintf(os.Stderr, "ocibuild: %v\n", err)
		os.Exit(1)
	}
}

func run(o *options, images, platforms string) error {
	var err error
	if o.Root, err = os.Getwd(); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(o.Root, "go.mod")); err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	if o.Version == "" {
		o.Version = version.Version
	}
	if o.Registry == "" {
		o.Registry = version.DefaultRepo
	}
	if o.Revision == "" {
		o.Revision = gitRevision()
	}
	if o.Epoch, err = version.SourceDateEpoch(); err != nil {
		return err
	}
	comps, err := selectComponents(images)
	if err != nil {
		return err
	}
	plats, err := parsePlatforms(platforms)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	results, err := build(ctx, *o, comps, plats)
	if err != nil {
		return err
	}
	printSummary(os.Stdout, results)
	o.Log("done in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func selectComponents(list string) ([]component, error) {
	var out []component
	for _, n := range fields(list) {
		found := false
		for _, c := range catalog {
			if c.Name == n {
				out, found = append(out, c), true
			}
		}
		if !found {
			var names []string
			for _, c := range catalog {
				names = append(names, c.Name)
			}
			return nil, fmt.Errorf("unknown image %q (known: %s)", n, strings.Join(names, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no images selected")
	}
	return out, nil
}

func parsePlatforms(list string) ([]platform, error) {
	var out []platform
	for _, f := range fields(list) {
		goos, goarch, ok := strings.Cut(f, "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("platform %q: want os/arch", f)
		}
		out = append(out, platform{goos, goarch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platforms selected")
	}
	return out, nil
}

func fields(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

func gitRevision() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
