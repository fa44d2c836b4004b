package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CLICommands are the commands a release builds, each a main package
// under cmd/: the node command, and the kubectl plugin that prints a run's
// per-node report.
var CLICommands = []string{"eraser", "kubectl-eraser"}

// CLIPlatforms are the platforms the commands are released for: the nodes
// Eraser's workers run on, where the node command is used.
var CLIPlatforms = []string{"linux/amd64", "linux/arm64", "windows/amd64"}

// CLIRepo is the commands' repository under the registry: an OCI artifact
// whose files are the binaries and SHA256SUMS, as `oras pull` fetches
// them.
const CLIRepo = "eraser-cli"

// Media types of the CLI artifact. The binaries are plain files, not image
// layers: nothing unpacks them, a client saves each under its title.
const (
	cliArtifactType = "application/vnd.eraser.cli.v1"
	cliFileType     = "application/octet-stream"
	cliEmptyConfig  = "application/vnd.oci.empty.v1+json"
	annotationTitle = "org.opencontainers.image.title"
)

// SumsFile lists the SHA-256 of every command's binary, as sha256sum
// writes it.
const SumsFile = "SHA256SUMS"

// versionPackage is where the version stamps go, as hack/ocibuild stamps
// the images' binaries.
const versionPackage = "github.com/eraser-oss/eraser/internal/process/version"

// CLI is how a release builds the commands.
type CLI struct {
	// Source is the repository root, the module of ./cmd/<command>.
	Source string
	// Out is the directory the binaries and SHA256SUMS are written to.
	Out string
	// Commit is stamped into the binaries with the version.
	Commit string
	// Tags and LDFlags are the release build's (the Makefile's GO_TAGS and
	// GO_LDFLAGS); the version stamps are added to LDFlags.
	Tags, LDFlags string
	// KrewURIBase is where the plugin's archives are downloaded from, as
	// the krew manifest names them; VERSION stands for the release's.
	// Empty: DefaultKrewURIBase.
	KrewURIBase string
}

// CLIFile is the file name of command built for platform (os/arch).
func CLIFile(command, platform string) string {
	goos, arch, _ := strings.Cut(platform, "/")
	name := command + "-" + goos + "-" + arch
	if goos == "windows" {
		name += ".exe"
	}
	return name
}

// cliPlatforms are the platforms a release with the given subset (none:
// every platform) builds the command for.
func cliPlatforms(subset []string) []string {
	if len(subset) == 0 {
		return CLIPlatforms
	}
	var out []string
	for _, p := range CLIPlatforms {
		if slices.Contains(subset, p) {
			out = append(out, p)
		}
	}
	return out
}

// BuildCLI builds every command of CLICommands for each platform into
// c.Out, static and reproducible (-trimpath, no VCS stamp, CGO off),
// stamped with the version, then the kubectl plugin's archives and krew
// manifest (krew.go), then SHA256SUMS. It returns the files written, the
// sums last.
func BuildCLI(ctx context.Context, c CLI, version string, platforms []string) ([]string, error) {
	if len(platforms) == 0 {
		return nil, fmt.Errorf("building the commands: no platform among %v", CLIPlatforms)
	}
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, fmt.Errorf("building the commands: %w", err)
	}
	commit := c.Commit
	if commit == "" {
		commit = "unknown"
	}
	ldflags := strings.TrimSpace(fmt.Sprintf("%s -X %s.Version=%s -X %s.Commit=%s", c.LDFlags, versionPackage, version, versionPackage, commit))
	var files []string
	var sums bytes.Buffer
	for _, command := range CLICommands {
		for _, p := range platforms {
			out := filepath.Join(c.Out, CLIFile(command, p))
			if err := buildCommand(ctx, c, command, p, ldflags, out); err != nil {
				return nil, err
			}
			data, err := os.ReadFile(out)
			if err != nil {
				return nil, fmt.Errorf("reading the built %s: %w", out, err)
			}
			sum := sha256.Sum256(data)
			// sha256sum's format, so that `sha256sum -c SHA256SUMS` checks them.
			fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), filepath.Base(out))
			files = append(files, out)
		}
	}
	base := c.KrewURIBase
	if base == "" {
		base = DefaultKrewURIBase
	}
	krew, err := writeKrew(c.Out, filepath.Join(c.Source, "LICENSE"), version, base, platforms)
	if err != nil {
		return nil, fmt.Errorf("the plugin for krew: %w", err)
	}
	for _, f := range krew {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), filepath.Base(f))
		files = append(files, f)
	}
	sumsPath := filepath.Join(c.Out, SumsFile)
	if err := os.WriteFile(sumsPath, sums.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", sumsPath, err)
	}
	return append(files, sumsPath), nil
}

func buildCommand(ctx context.Context, c CLI, command, platform, ldflags, out string) error {
	goos, arch, _ := strings.Cut(platform, "/")
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=" + ldflags, "-o", out}
	if c.Tags != "" {
		args = append(args, "-tags="+c.Tags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/"+command)...)
	cmd.Dir = c.Source
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s for %s: %w\n%s", command, platform, err, msg)
	}
	return nil
}

// cliArtifact is the OCI artifact of the built files: one blob per file,
// titled with its name.
func cliArtifact(files []string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, cliEmptyConfig)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:       static.NewLayer(data, cliFileType),
			Annotations: map[string]string{annotationTitle: filepath.Base(f)},
		})
		if err != nil {
			return nil, err
		}
	}
	return artifactTyped{img}, nil
}

// artifactTyped sets the manifest's artifactType, which registries and
// clients use to tell the artifact from a runnable image.
type artifactTyped struct{ v1.Image }

func (a artifactTyped) Manifest() (*v1.Manifest, error) {
	m, err := a.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.ArtifactType = cliArtifactType
	return m, nil
}

func (a artifactTyped) RawManifest() ([]byte, error) {
	m, err := a.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func (a artifactTyped) Digest() (v1.Hash, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

func (a artifactTyped) Size() (int64, error) {
	raw, err := a.RawManifest()
	return int64(len(raw)), err
}

// pushImage writes img to tag unless the tag already holds it.
func pushImage(tag name.Tag, img v1.Image, overwrite bool, ropts []remote.Option) (Pushed, error) {
	dig, err := img.Digest()
	if err != nil {
		return Pushed{}, err
	}
	return pushOnce(tag, dig, overwrite, "build the same commit with the same toolchain",
		func() error { return remote.Write(tag, img, ropts...) }, ropts)
}
