// What a release attests about each image: its software bill of materials
// (SPDX 2.3 JSON) and its build provenance (SLSA 0.2), both read from the
// image itself: every file of its layers, and the Go build information
// that each Go binary in them carries (what `go version -m` prints).

package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Predicate types, as cosign's --type names them: spdxjson and
// slsaprovenance.
const (
	PredicateSPDX       = "https://spdx.dev/Document"
	PredicateProvenance = "https://slsa.dev/provenance/v0.2"
)

// Labels hack/ocibuild puts in every image's configuration.
const (
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
)

// buildType names how a release builds its images, for the provenance.
const buildType = "https://github.com/eraser-oss/eraser/blob/main/docs/release.md"

// platformContent is what one platform's image holds.
type platformContent struct {
	Platform string
	Digest   v1.Hash
	Labels   map[string]string
	Files    []layerFile
	// Binaries are the Go binaries among Files, by path.
	Binaries map[string]*debug.BuildInfo
}

type layerFile struct {
	Path         string
	Size         int64
	SHA1, SHA256 string
}

// readContent reads every platform image of idx: its files and its Go
// binaries' build information.
func readContent(idx v1.ImageIndex) ([]platformContent, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []platformContent
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		pc := platformContent{Digest: d.Digest, Binaries: map[string]*debug.BuildInfo{}}
		if d.Platform != nil {
			pc.Platform = d.Platform.OS + "/" + d.Platform.Architecture
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		pc.Labels = cf.Config.Labels
		layers, err := img.Layers()
		if err != nil {
			return nil, err
		}
		for _, l := range layers {
			if err := readLayer(l, &pc); err != nil {
				return nil, fmt.Errorf("%s: %w", pc.Platform, err)
			}
		}
		out = append(out, pc)
	}
	return out, nil
}

func readLayer(l v1.Layer, pc *platformContent) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		s1, s256 := sha1.Sum(data), sha256.Sum256(data)
		p := "/" + strings.TrimPrefix(h.Name, "/")
		pc.Files = append(pc.Files, layerFile{Path: p, Size: int64(len(data)), SHA1: hex.EncodeToString(s1[:]), SHA256: hex.EncodeToString(s256[:])})
		if bi, err := buildinfo.Read(bytes.NewReader(data)); err == nil {
			pc.Binaries[p] = bi
		}
	}
}

// SPDX 2.3 JSON, the parts a bill of materials of these images uses.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxFile struct {
	FileName         string         `json:"fileName"`
	SPDXID           string         `json:"SPDXID"`
	Checksums        []spdxChecksum `json:"checksums"`
	LicenseConcluded string         `json:"licenseConcluded"`
	CopyrightText    string         `json:"copyrightText"`
	Comment          string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

// spdxID makes an SPDX identifier of parts: letters, digits, "." and "-".
func spdxID(parts ...string) string {
	s := strings.Join(parts, "-")
	return "SPDXRef-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

// goPURL is the package URL of a Go module version.
func goPURL(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

// sbom is the bill of materials of repo@dig, whose platform images hold
// content: per platform, the image, every file of its layer, and the Go
// modules (with the toolchain's standard library) linked into each
// binary.
func sbom(repo name.Repository, dig v1.Hash, content []platformContent, epoch time.Time) spdxDocument {
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              repo.Name() + "@" + dig.String(),
		DocumentNamespace: "https://" + repo.Name() + "/spdx/" + dig.Hex,
		CreationInfo:      spdxCreationInfo{Created: epoch.UTC().Format(time.RFC3339), Creators: []string{"Tool: eraser-release"}},
		Packages:          []spdxPackage{},
		Files:             []spdxFile{},
	}
	pkg := func(p spdxPackage) {
		p.DownloadLocation, p.LicenseConcluded, p.CopyrightText = noAssertion, noAssertion, noAssertion
		if p.LicenseDeclared == "" {
			p.LicenseDeclared = noAssertion
		}
		doc.Packages = append(doc.Packages, p)
	}
	rel := func(a, typ, b string) { doc.Relationships = append(doc.Relationships, spdxRelationship{a, typ, b}) }
	for _, pc := range content {
		imgID := spdxID("image", pc.Platform)
		pkg(spdxPackage{
			Name: repo.RepositoryStr(), SPDXID: imgID, VersionInfo: pc.Labels[labelVersion], PrimaryPurpose: "CONTAINER",
			Checksums:    []spdxChecksum{{"SHA256", pc.Digest.Hex}},
			ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:oci/" + lastElement(repo.RepositoryStr()) + "@" + pc.Digest.String() + "?repository_url=" + repo.Name()}},
			Comment:      "the image for " + pc.Platform,
		})
		rel("SPDXRef-DOCUMENT", "DESCRIBES", imgID)
		for _, f := range pc.Files {
			fileID := spdxID("file", pc.Platform, f.Path)
			doc.Files = append(doc.Files, spdxFile{
				FileName: f.Path, SPDXID: fileID, LicenseConcluded: noAssertion, CopyrightText: noAssertion,
				Checksums: []spdxChecksum{{"SHA1", f.SHA1}, {"SHA256", f.SHA256}},
			})
			rel(imgID, "CONTAINS", fileID)
			bi := pc.Binaries[f.Path]
			if bi == nil {
				continue
			}
			mainID := spdxID("go", pc.Platform, bi.Main.Path)
			pkg(spdxPackage{
				Name: bi.Main.Path, SPDXID: mainID, VersionInfo: pc.Labels[labelVersion], PrimaryPurpose: "APPLICATION",
				ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", goPURL(bi.Main.Path, "v"+strings.TrimPrefix(pc.Labels[labelVersion], "v"))}},
				Comment:      "main package " + bi.Path + ", built by " + bi.GoVersion + " " + buildSettings(bi),
			})
			rel(fileID, "GENERATED_FROM", mainID)
			stdID := spdxID("go", pc.Platform, "stdlib")
			pkg(spdxPackage{
				Name: "stdlib", SPDXID: stdID, VersionInfo: bi.GoVersion, LicenseDeclared: "BSD-3-Clause", PrimaryPurpose: "LIBRARY",
				ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", goPURL("stdlib", bi.GoVersion)}},
			})
			rel(mainID, "DEPENDS_ON", stdID)
			for _, dep := range bi.Deps {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				depID := spdxID("go", pc.Platform, dep.Path, dep.Version)
				p := spdxPackage{
					Name: dep.Path, SPDXID: depID, VersionInfo: dep.Version, PrimaryPurpose: "LIBRARY",
					ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", goPURL(dep.Path, dep.Version)}},
				}
				if dep.Sum != "" {
					p.Comment = "go.sum " + dep.Sum
				}
				pkg(p)
				rel(mainID, "DEPENDS_ON", depID)
			}
		}
	}
	return doc
}

func lastElement(repo string) string {
	return repo[strings.LastIndex(repo, "/")+1:]
}

// buildSettings are the settings that shape a binary (GOOS, GOARCH,
// -tags, -ldflags, CGO_ENABLED, ...), as `go version -m` prints them.
func buildSettings(bi *debug.BuildInfo) string {
	var out []string
	for _, s := range bi.Settings {
		out = append(out, s.Key+"="+s.Value)
	}
	return strings.Join(out, " ")
}

// SLSA provenance 0.2, as cosign's --type slsaprovenance reads it.
type slsaPredicate struct {
	Builder     provBuilder    `json:"builder"`
	BuildType   string         `json:"buildType"`
	Invocation  provInvocation `json:"invocation"`
	BuildConfig any            `json:"buildConfig,omitempty"`
	Metadata    provMetadata   `json:"metadata"`
	Materials   []provMaterial `json:"materials"`
}

type provBuilder struct {
	ID string `json:"id"`
}

type provInvocation struct {
	ConfigSource provConfigSource  `json:"configSource"`
	Parameters   map[string]string `json:"parameters"`
}

type provConfigSource struct {
	URI        string            `json:"uri"`
	Digest     map[string]string `json:"digest"`
	EntryPoint string            `json:"entryPoint"`
}

type provMetadata struct {
	BuildFinishedOn string           `json:"buildFinishedOn"`
	Completeness    provCompleteness `json:"completeness"`
	Reproducible    bool             `json:"reproducible"`
}

type provCompleteness struct {
	Parameters  bool `json:"parameters"`
	Environment bool `json:"environment"`
	Materials   bool `json:"materials"`
}

type provMaterial struct {
	URI    string            `json:"uri"`
	Digest map[string]string `json:"digest,omitempty"`
}

// binaryConfig is one binary's build, for the provenance's buildConfig.
type binaryConfig struct {
	Platform  string            `json:"platform"`
	Path      string            `json:"path"`
	Package   string            `json:"package"`
	GoVersion string            `json:"goVersion"`
	Settings  map[string]string `json:"settings"`
}

// slsaProvenance says how repo's images were built: by builderID, from
// the source revision their labels name, with the Go toolchain and build
// settings their binaries record, from these module versions (the
// materials: the source, then every module linked in, once).
func slsaProvenance(builderID string, content []platformContent, params map[string]string, epoch time.Time) slsaPredicate {
	var labels map[string]string
	if len(content) > 0 {
		labels = content[0].Labels
	}
	source := "git+" + labels[labelSource]
	pr := slsaPredicate{
		Builder:   provBuilder{ID: builderID},
		BuildType: buildType,
		Invocation: provInvocation{
			ConfigSource: provConfigSource{URI: source, Digest: map[string]string{"sha1": labels[labelRevision]}, EntryPoint: "make release"},
			Parameters:   params,
		},
		Metadata:  provMetadata{BuildFinishedOn: epoch.UTC().Format(time.RFC3339), Completeness: provCompleteness{Parameters: true, Materials: true}, Reproducible: true},
		Materials: []provMaterial{{URI: source, Digest: map[string]string{"sha1": labels[labelRevision]}}},
	}
	var configs []binaryConfig
	seen := map[string]bool{}
	for _, pc := range content {
		for _, p := range slices.Sorted(maps.Keys(pc.Binaries)) {
			bi := pc.Binaries[p]
			set := map[string]string{}
			for _, s := range bi.Settings {
				set[s.Key] = s.Value
			}
			configs = append(configs, binaryConfig{Platform: pc.Platform, Path: p, Package: bi.Path, GoVersion: bi.GoVersion, Settings: set})
			toolchain := goPURL("stdlib", bi.GoVersion)
			if !seen[toolchain] {
				seen[toolchain] = true
				pr.Materials = append(pr.Materials, provMaterial{URI: toolchain})
			}
			for _, dep := range bi.Deps {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				u := goPURL(dep.Path, dep.Version)
				if seen[u] {
					continue
				}
				seen[u] = true
				m := provMaterial{URI: u}
				if dep.Sum != "" {
					// The go.sum hash (h1: dirhash), the form the module
					// proxy's checksum database publishes.
					m.Digest = map[string]string{"dirHash": dep.Sum}
				}
				pr.Materials = append(pr.Materials, m)
			}
		}
	}
	pr.BuildConfig = map[string]any{"binaries": configs}
	return pr
}
