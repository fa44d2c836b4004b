package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"debug/pe"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// binaryKind describes a built file as the release promises it: the
// platform its header is for, and for Linux whether it is static (no
// program interpreter, so it runs on any node's userland).
func binaryKind(t *testing.T, path string) string {
	t.Helper()
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
		linking := "static"
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				linking = "dynamic"
			}
		}
		return "linux/" + arch + " " + linking
	}
	f, err := pe.Open(path)
	if err != nil {
		t.Fatalf("%s is neither ELF nor PE: %v", path, err)
	}
	defer f.Close()
	arch := map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
	return "windows/" + arch
}

// The release builds both commands for each platform asked, static
// and stamped, writes SHA256SUMS beside the binaries, and pushes them as
// one artifact that gives back the same files; the build is reproducible,
// so a second release changes nothing.
func TestReleaseCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("install tier: builds both commands for every platform; run make test-install")
	}
	cases := map[string]struct {
		platforms []string
		want      map[string]string // file -> binaryKind
	}{
		"every platform": {
			want: map[string]string{
				"eraser-linux-amd64":                  "linux/amd64 static",
				"eraser-linux-arm64":                  "linux/arm64 static",
				"eraser-windows-amd64.exe":            "windows/amd64",
				"kubectl-eraser-linux-amd64":          "linux/amd64 static",
				"kubectl-eraser-linux-arm64":          "linux/arm64 static",
				"kubectl-eraser-windows-amd64.exe":    "windows/amd64",
				"kubectl-eraser-linux-amd64.tar.gz":   "krew archive of kubectl-eraser",
				"kubectl-eraser-linux-arm64.tar.gz":   "krew archive of kubectl-eraser",
				"kubectl-eraser-windows-amd64.tar.gz": "krew archive of kubectl-eraser.exe",
				KrewManifest:                          "krew manifest of 3 platforms",
			},
		},
		"a partial release, as the kubelet tier makes": {
			platforms: []string{"linux/amd64"},
			want: map[string]string{
				"eraser-linux-amd64":                "linux/amd64 static",
				"kubectl-eraser-linux-amd64":        "linux/amd64 static",
				"kubectl-eraser-linux-amd64.tar.gz": "krew archive of kubectl-eraser",
				KrewManifest:                        "krew manifest of 1 platforms",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			helmConfig := isolate(t)
			reg := startRegistry(t)
			images := t.TempDir()
			writeLayouts(t, images, reg, testVersion, tc.platforms...)
			o := options(t, reg, images, helmConfig)
			o.Platforms = tc.platforms
			out := t.TempDir()
			o.CLI = &CLI{Source: repoRoot(t), Out: out, Commit: "0123abc", Tags: "grpcnotrace", LDFlags: "-s -w"}

			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			files := map[string][]byte{}
			for _, f := range res.CLIFiles {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				files[filepath.Base(f)] = data
				switch base := filepath.Base(f); {
				case base == SumsFile:
				case strings.HasSuffix(base, ".tar.gz"):
					got[base] = krewArchiveKind(t, data)
				case base == KrewManifest:
					// Checked once every archive is read, below.
				default:
					got[base] = binaryKind(t, f)
				}
			}
			if m, ok := files[KrewManifest]; ok {
				got[KrewManifest] = krewManifestKind(t, m, files)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("built (-want +got):\n%s", diff)
			}
			entries, _ := os.ReadDir(out)
			if len(entries) != len(tc.want)+1 {
				t.Errorf("%s holds %d files, want the %d binaries and %s", out, len(entries), len(tc.want), SumsFile)
			}

			var sums []string
			for _, f := range slices.Sorted(maps.Keys(tc.want)) {
				sum := sha256.Sum256(files[f])
				sums = append(sums, hex.EncodeToString(sum[:])+"  "+f)
			}
			slices.Sort(sums)
			gotSums := strings.Split(strings.TrimSpace(string(files[SumsFile])), "\n")
			slices.Sort(gotSums)
			if diff := cmp.Diff(sums, gotSums); diff != "" {
				t.Errorf("%s (-want +got):\n%s", SumsFile, diff)
			}

			// The binaries for this machine run and say which release they are.
			for command, agent := range map[string]string{"eraser": "eraser/cli/", "kubectl-eraser": "eraser/kubectl-eraser/"} {
				host := CLIFile(command, runtime.GOOS+"/"+runtime.GOARCH)
				if files[host] == nil {
					continue
				}
				v, err := exec.Command(filepath.Join(out, host), "version").CombinedOutput()
				if err != nil || !strings.Contains(string(v), agent+testVersion) || !strings.Contains(string(v), "0123abc") {
					t.Errorf("%s version: %q, %v; want the release's version and commit", host, v, err)
				}
			}

			wantRef := reg + "/" + CLIRepo + ":" + testVersion
			if res.CLI == nil || res.CLI.Ref != wantRef || res.CLI.Unchanged {
				t.Fatalf("CLI pushed %+v, want %s newly pushed", res.CLI, wantRef)
			}
			if pulled := pullCLI(t, wantRef, res.CLI.Digest); !cmp.Equal(pulled, files) {
				t.Errorf("the artifact holds %v, want the built files %v", keys(pulled), keys(files))
			}

			again, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if again.CLI == nil || !again.CLI.Unchanged || again.CLI.Digest != res.CLI.Digest {
				t.Errorf("second release of the CLI: %+v, want unchanged %s (a reproducible build)", again.CLI, res.CLI.Digest)
			}
		})
	}
}

// pullCLI reads the CLI artifact back as a client such as `oras pull`
// does: each blob saved under its title.
func pullCLI(t *testing.T, ref, digest string) map[string][]byte {
	t.Helper()
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != digest || m.ArtifactType != cliArtifactType {
		t.Errorf("artifact %s of type %q, want %s of %s", d, m.ArtifactType, digest, cliArtifactType)
	}
	out := map[string][]byte{}
	for _, l := range m.Layers {
		title := l.Annotations[annotationTitle]
		if title == "" || l.MediaType != cliFileType {
			t.Errorf("blob %s: title %q, type %s", l.Digest, title, l.MediaType)
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layer.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[title] = data
	}
	return out
}

func keys(m map[string][]byte) string {
	var b bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s(%d) ", k, len(m[k]))
	}
	return b.String()
}

// krewArchiveKind names the plugin binary in a krew archive, which must
// hold it and the license.
func krewArchiveKind(t *testing.T, data []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	bin := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.HasPrefix(h.Name, "kubectl-eraser") {
			bin = h.Name
		}
	}
	if !slices.Contains(names, "LICENSE") || bin == "" {
		t.Errorf("a krew archive holds %v: want the plugin and LICENSE", names)
	}
	return "krew archive of " + bin
}

// krewManifestKind checks the manifest's archives against the files built
// beside it.
func krewManifestKind(t *testing.T, data []byte, files map[string][]byte) string {
	t.Helper()
	var p krewPlugin
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.Kind != "Plugin" || p.Metadata["name"] != "eraser" || !strings.HasPrefix(p.Spec.Version, "v") {
		t.Errorf("krew manifest: %+v", p)
	}
	for _, pl := range p.Spec.Platforms {
		archive := pl.URI[strings.LastIndex(pl.URI, "/")+1:]
		sum := sha256.Sum256(files[archive])
		if _, ok := files[archive]; !ok || hex.EncodeToString(sum[:]) != pl.SHA256 {
			t.Errorf("krew manifest: %s (sha256 %s) is not an archive built beside it", archive, pl.SHA256)
		}
	}
	return fmt.Sprintf("krew manifest of %d platforms", len(p.Spec.Platforms))
}
