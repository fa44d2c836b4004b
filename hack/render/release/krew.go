package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The kubectl plugin as krew installs it: one archive per platform (the
// binary under the name kubectl runs it by, and the license) and the
// plugin manifest naming each with its SHA-256, to submit to a krew index
// or install from with `kubectl krew install --manifest`.
const (
	// KrewManifest is the plugin manifest's file name.
	KrewManifest = "kubectl-eraser.krew.yaml"
	// DefaultKrewURIBase is where a release's archives are downloaded from,
	// with VERSION for the release's: the assets of its GitHub release, tagged vVERSION.
	DefaultKrewURIBase = "https://github.com/eraser-oss/eraser/releases/download/vVERSION"
	pluginCommand      = "kubectl-eraser"
)

// KrewArchive is the archive of the plugin for platform (os/arch).
func KrewArchive(platform string) string {
	goos, arch, _ := strings.Cut(platform, "/")
	return pluginCommand + "-" + goos + "-" + arch + ".tar.gz"
}

// krewPlugin is the manifest's shape (krew's v1alpha2 Plugin).
type krewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       krewSpec       `json:"spec"`
}

type krewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []krewPlatform `json:"platforms"`
}

type krewPlatform struct {
	Selector map[string]map[string]string `json:"selector"`
	URI      string                       `json:"uri"`
	SHA256   string                       `json:"sha256"`
	Bin      string                       `json:"bin"`
}

// KrewManifestFor is the plugin manifest of a release: version (krew wants
// it as vX.Y.Z), the archives' SHA-256 by platform, downloaded from base
// (VERSION in it stands for the release's version).
func KrewManifestFor(version, base string, sums map[string]string, platforms []string) ([]byte, error) {
	v := version
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	base = strings.TrimSuffix(strings.ReplaceAll(base, "VERSION", version), "/")
	p := krewPlugin{
		APIVersion: "krew.googlecontainertools.github.com/v1alpha2",
		Kind:       "Plugin",
		Metadata:   map[string]any{"name": "eraser"},
		Spec: krewSpec{
			Version:          v,
			Homepage:         "https://github.com/eraser-oss/eraser",
			ShortDescription: "See and steer Eraser, which removes unused images from nodes",
			Description: "The day-to-day commands of Eraser, which removes unused and vulnerable container images\n" +
				"from every node of a cluster: status (what runs and waits), run, pause and resume, plan\n" +
				"(what a clean-up would remove, before it does), report (what a run did on each node),\n" +
				"config check.\n",
		},
	}
	for _, platform := range platforms {
		sum, ok := sums[platform]
		if !ok {
			return nil, fmt.Errorf("no archive of the plugin for %s", platform)
		}
		goos, arch, _ := strings.Cut(platform, "/")
		bin := pluginCommand
		if goos == "windows" {
			bin += ".exe"
		}
		p.Spec.Platforms = append(p.Spec.Platforms, krewPlatform{
			Selector: map[string]map[string]string{"matchLabels": {"os": goos, "arch": arch}},
			URI:      base + "/" + KrewArchive(platform),
			SHA256:   sum,
			Bin:      bin,
		})
	}
	return yaml.Marshal(p)
}

// writeKrew writes each platform's archive of the built plugin and the
// manifest into out, reproducibly (fixed times and owners), and returns
// the files written.
func writeKrew(out, license, version, base string, platforms []string) ([]string, error) {
	lic, err := os.ReadFile(license)
	if err != nil {
		return nil, fmt.Errorf("the plugin's archives: %w", err)
	}
	sums := map[string]string{}
	var files []string
	for _, platform := range platforms {
		bin, err := os.ReadFile(filepath.Join(out, CLIFile(pluginCommand, platform)))
		if err != nil {
			return nil, fmt.Errorf("the plugin's archive for %s: %w", platform, err)
		}
		name := pluginCommand
		if strings.HasPrefix(platform, "windows/") {
			name += ".exe"
		}
		data, err := tarGz([]tarEntry{{name, bin, 0o755}, {"LICENSE", lic, 0o644}})
		if err != nil {
			return nil, err
		}
		path := filepath.Join(out, KrewArchive(platform))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		sums[platform] = hex.EncodeToString(sum[:])
		files = append(files, path)
	}
	manifest, err := KrewManifestFor(version, base, sums, platforms)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(out, KrewManifest)
	if err := os.WriteFile(path, manifest, 0o644); err != nil {
		return nil, err
	}
	return append(files, path), nil
}

type tarEntry struct {
	name string
	data []byte
	mode int64
}

// tarGz is a gzip'd tar of the entries, the same bytes for the same
// entries whenever it is made.
func tarGz(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
