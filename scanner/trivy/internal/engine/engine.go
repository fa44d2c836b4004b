// Package engine scans one image with Trivy used as a library: the image is
// read where it lies (the node's content store), analysed in memory against
// the vulnerability DB opened once per run, and Trivy's report is turned
// into our own engine-neutral report, which internal/node/scan judges.
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	tdb "github.com/aquasecurity/trivy-db/pkg/db"
	dbtypes "github.com/aquasecurity/trivy-db/pkg/types"
	"github.com/aquasecurity/trivy/pkg/cache"
	trivydb "github.com/aquasecurity/trivy/pkg/db"
	"github.com/aquasecurity/trivy/pkg/fanal/analyzer"
	"github.com/aquasecurity/trivy/pkg/fanal/applier"
	"github.com/aquasecurity/trivy/pkg/fanal/artifact"
	aimage "github.com/aquasecurity/trivy/pkg/fanal/artifact/image"
	ftypes "github.com/aquasecurity/trivy/pkg/fanal/types"
	tscan "github.com/aquasecurity/trivy/pkg/scan"
	"github.com/aquasecurity/trivy/pkg/scan/langpkg"
	"github.com/aquasecurity/trivy/pkg/scan/local"
	"github.com/aquasecurity/trivy/pkg/scan/ospkg"
	"github.com/aquasecurity/trivy/pkg/types"
	"github.com/aquasecurity/trivy/pkg/vulnerability"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/scan"
)

// Source opens one of the node's images for scanning.
type Source interface {
	Open(ctx context.Context, img handoff.Image) (ftypes.Image, error)
}

// Engine is Trivy as a scan.Engine.
type Engine struct {
	source   Source
	pkgTypes []string
	disabled []analyzer.Type
}

// New opens the vulnerability DB in dbDir (read-only; Trivy keeps one DB
// handle per process, so there is one Engine per process). types are the
// configuration's vulnerabilities.types ("os", "library").
func New(dbDir string, src Source, pkgTypes []string) (*Engine, error) {
	if err := trivydb.Init(dbDir); err != nil {
		return nil, fmt.Errorf("opening the vulnerability DB in %s: %w", dbDir, err)
	}
	if len(pkgTypes) == 0 {
		pkgTypes = []string{types.PkgTypeOS, types.PkgTypeLibrary}
	}
	return &Engine{source: src, pkgTypes: pkgTypes, disabled: disabledAnalyzers(pkgTypes)}, nil
}

// Close closes the DB.
func (e *Engine) Close() error { return trivydb.Close() }

// disabledAnalyzers is everything a vulnerability scan of packages does not
// need. Trivy's CLI builds this list from its flags; as a library it must
// be given, or the secret and misconfiguration scanners run (slow), and the
// apk-command analyzer downloads Alpine's package index even offline.
func disabledAnalyzers(pkgTypes []string) []analyzer.Type {
	out := []analyzer.Type{
		analyzer.TypeApkCommand, analyzer.TypeSecret, analyzer.TypeLicenseFile, analyzer.TypeHistoryDockerfile,
		analyzer.TypeExecutable, analyzer.TypeRpmArchive, analyzer.TypeImageConfigSecret,
	}
	out = append(out, analyzer.TypeConfigFiles...)
	if !slices.Contains(pkgTypes, types.PkgTypeLibrary) {
		out = append(out, analyzer.TypeLanguages...)
	}
	return out
}

// Scan implements scan.Engine.
func (e *Engine) Scan(ctx context.Context, img handoff.Image) (scan.Report, error) {
	ti, err := e.source.Open(ctx, img)
	if err != nil {
		return scan.Report{}, err
	}
	return e.ScanImage(ctx, ti)
}

// ScanImage scans an opened image. The report names the content scanned:
// the digest of the config the image was read with.
func (e *Engine) ScanImage(ctx context.Context, img ftypes.Image) (scan.Report, error) {
	content, err := img.ConfigName()
	if err != nil {
		return scan.Report{}, fmt.Errorf("digesting the image config: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return scan.Report{}, fmt.Errorf("reading the image config: %w", err)
	}
	// Trivy has no advisories for Windows images: say so rather than call
	// them clean.
	if cfg.OS == "windows" {
		return scan.Report{Unsupported: true, Content: content.String()}, nil
	}
	// A fresh in-memory cache per image: nothing grows across a run of
	// thousands of images, and nothing is written to the node's disk.
	c := cache.NewMemoryCache()
	art, err := aimage.NewArtifact(img, c, artifact.Option{
		DisabledAnalyzers: e.disabled,
		DisabledHandlers:  []ftypes.HandlerType{ftypes.UnpackagedPostHandler},
		Offline:           true,
		NoProgress:        true,
		Parallel:          1,
	})
	if err != nil {
		return scan.Report{}, fmt.Errorf("preparing the scan: %w", err)
	}
	svc := tscan.NewService(local.NewService(applier.NewApplier(c), ospkg.NewScanner(), langpkg.NewScanner(),
		vulnerability.NewClient(tdb.Config{})), art)
	rep, err := svc.ScanArtifact(ctx, types.ScanOptions{
		PkgTypes:         e.pkgTypes,
		PkgRelationships: ftypes.Relationships,
		Scanners:         types.Scanners{types.VulnerabilityScanner},
		// Without "auto" every finding's severity is UNKNOWN.
		VulnSeveritySources: []dbtypes.SourceID{"auto"},
	})
	if err != nil {
		if ctx.Err() != nil {
			return scan.Report{}, fmt.Errorf("scan: %w", errors.Join(ctx.Err(), err))
		}
		return scan.Report{}, fmt.Errorf("scan: %w", err)
	}
	out := convert(rep)
	out.Content = content.String()
	return out, nil
}

// convert keeps what the policy needs. An image with neither an OS nor any
// package Trivy recognises (a static binary on an empty base, say) cannot be
// judged: unsupported, so kept.
func convert(rep types.Report) scan.Report {
	var out scan.Report
	os := rep.Metadata.OS
	if os != nil {
		out.EndOfLife = os.Eosl
	}
	pkgs := 0
	for _, r := range rep.Results {
		pkgs += len(r.Packages)
		kind := ""
		switch r.Class {
		case types.ClassOSPkg:
			kind = types.PkgTypeOS
		case types.ClassLangPkg:
			kind = types.PkgTypeLibrary
		}
		for _, v := range r.Vulnerabilities {
			out.Findings = append(out.Findings, scan.Finding{
				ID: v.VulnerabilityID, Package: v.PkgName, Severity: v.Severity,
				FixedVersion: v.FixedVersion, Status: v.Status.String(), Type: kind,
			})
		}
	}
	noOS := os == nil || os.Family == "" || os.Family == "none"
	if noOS && pkgs == 0 && len(out.Findings) == 0 {
		out.Unsupported = true
	}
	return out
}
