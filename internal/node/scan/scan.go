// Package scan is the scanner's judgement, kept apart from any scanning
// engine so that it is tested without one: an engine reports findings per
// image; the policy decides the verdict (vulnerable, end-of-life, clean,
// unsupported, failed) and whether the image goes. What could not be judged
// is kept: unsupported and unscanned images always, failed scans unless the
// configuration opts in.
package scan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Verdict is the outcome for one image.
type Verdict string

// The verdicts.
const (
	Vulnerable  Verdict = "vulnerable"
	EndOfLife   Verdict = "end-of-life"
	Clean       Verdict = "clean"
	Unsupported Verdict = "unsupported"
	Failed      Verdict = "failed"
	// NotScanned: the total timeout ran out first.
	NotScanned Verdict = "not scanned"
)

// Finding is one vulnerability an engine found.
type Finding struct {
	ID           string // CVE-2024-1234, GHSA-...
	Package      string
	Severity     string // CRITICAL, HIGH, MEDIUM, LOW, UNKNOWN
	FixedVersion string
	Status       string // fixed, affected, will_not_fix, ...
	// Type is "os" (distribution packages) or "library" (language packages).
	Type string
}

// Report is what an engine found for one image.
type Report struct {
	Findings []Finding
	// EndOfLife: the image's OS is no longer supported by its vendor.
	EndOfLife bool
	// Unsupported: the engine cannot scan this kind of image (a Windows
	// image for Trivy, say).
	Unsupported bool
	// Content is the config digest (sha256:<hex>) of the image the engine
	// opened and judged, "" when the engine does not say. A runtime finds
	// an image by name when it has no record of its ID, and a name may
	// have moved to other content since the image was listed: the verdict
	// is then about that content, not about the image.
	Content string
}

// Engine scans one image. An error means the scan failed.
type Engine interface {
	Scan(ctx context.Context, img handoff.Image) (Report, error)
}

// Policy is the scanner configuration's judgement part.
type Policy struct {
	Severities      []string
	IgnoreUnfixed   bool
	Types           []string
	IgnoredStatuses []string
	DeleteEOL       bool
	DeleteFailed    bool
}

// PolicyOf is the judgement part of a scanner configuration.
func PolicyOf(c scanconfig.Config) Policy {
	return Policy{
		Severities: c.Vulnerabilities.Severities, IgnoreUnfixed: c.Vulnerabilities.IgnoreUnfixed,
		Types: c.Vulnerabilities.Types, IgnoredStatuses: c.Vulnerabilities.IgnoredStatuses,
		DeleteEOL: c.DeleteEOLImages, DeleteFailed: c.DeleteFailedImages,
	}
}

// Judgement is the verdict on one image, with the findings that decided it.
type Judgement struct {
	Image    handoff.Image
	Verdict  Verdict
	Remove   bool
	Findings []Finding
	// EndOfLife is the engine's word, whatever the verdict (a vulnerable
	// image may be end of life too).
	EndOfLife bool
	Error     string
	// More counts the findings a shared verdict matched beyond those it
	// lists (it lists workerresult.MaxFindings).
	More int
	// From is the node and pod whose scan made a shared verdict; nil when
	// this node scanned the image.
	From *workerresult.Origin
	// Content is Report.Content: what this node's engine judged.
	Content string
}

// ErrCannotJudge marks an engine's failure that is the scanner's, not the
// image's (it has no vulnerability DB): the image is not scanned and kept,
// whatever deleteFailedImages says, as when the scanner fails before
// judging anything.
var ErrCannotJudge = errors.New("this scanner cannot judge")

// ErrOtherContent marks an engine's refusal to scan an image because the
// names it could find the image by lead to other content than the image's
// ID: a verdict would be about that content. The image is not scanned and
// kept, whatever deleteFailedImages says.
var ErrOtherContent = errors.New("the image's names lead to other content than its ID")

// Judge applies the policy to one image's report (or scan error).
func (p Policy) Judge(img handoff.Image, r Report, err error) Judgement {
	j := Judgement{Image: img, EndOfLife: err == nil && r.EndOfLife, Content: r.Content}
	switch {
	case errors.Is(err, ErrCannotJudge), errors.Is(err, ErrOtherContent):
		j.Verdict, j.Error = NotScanned, err.Error()
		return j
	case err != nil:
		j.Verdict, j.Error, j.Remove = Failed, err.Error(), p.DeleteFailed
		return j
	case otherContent(img, r.Content):
		j.Verdict, j.EndOfLife = NotScanned, false
		j.Error = fmt.Sprintf("the scanner judged content %s, not the image's", r.Content)
		return j
	case r.Unsupported:
		j.Verdict = Unsupported
		return j
	}
	for _, f := range r.Findings {
		if p.counts(f) {
			j.Findings = append(j.Findings, f)
		}
	}
	switch {
	case len(j.Findings) > 0:
		j.Verdict, j.Remove = Vulnerable, true
	case r.EndOfLife:
		j.Verdict, j.Remove = EndOfLife, p.DeleteEOL
	default:
		j.Verdict = Clean
	}
	return j
}

// otherContent says whether an engine reported judging other content than
// the image's ID names. An ID that is no digest (no runtime's) cannot be
// compared, and is judged as the engine reports.
func otherContent(img handoff.Image, content string) bool {
	want, ok := scanshare.Digest(img.ImageID)
	return ok && content != "" && content != want
}

func (p Policy) counts(f Finding) bool {
	if len(p.Severities) > 0 && !containsFold(p.Severities, f.Severity) {
		return false
	}
	if len(p.Types) > 0 && f.Type != "" && !containsFold(p.Types, f.Type) {
		return false
	}
	if p.IgnoreUnfixed && f.FixedVersion == "" {
		return false
	}
	if f.Status != "" && containsFold(p.IgnoredStatuses, f.Status) {
		return false
	}
	return true
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, s) })
}

// Run scans images one by one, each bounded by perImage, all by total. When
// the total runs out, the rest are NotScanned and kept (upstream marked them
// failed, and so removed them by default).
func Run(ctx context.Context, e Engine, images []handoff.Image, p Policy, perImage, total time.Duration) []Judgement {
	if total > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, total)
		defer cancel()
	}
	out := make([]Judgement, 0, len(images))
	for i, img := range images {
		if ctx.Err() != nil {
			for _, rest := range images[i:] {
				out = append(out, Judgement{Image: rest, Verdict: NotScanned})
			}
			break
		}
		ictx, cancel := ctx, context.CancelFunc(func() {})
		if perImage > 0 {
			ictx, cancel = context.WithTimeout(ctx, perImage)
		}
		r, err := e.Scan(ictx, img)
		cancel()
		if err != nil && ctx.Err() != nil {
			// The total ran out during this scan: not judged, kept.
			out = append(out, Judgement{Image: img, Verdict: NotScanned})
			continue
		}
		out = append(out, p.Judge(img, r, err))
	}
	return out
}

// Split separates the images to remove into non-compliant and failed, as a
// scanner hands them on.
func Split(js []Judgement) (nonCompliant, failed []handoff.Image) {
	for _, j := range js {
		switch {
		case !j.Remove:
		case j.Verdict == Failed:
			failed = append(failed, j.Image)
		default:
			nonCompliant = append(nonCompliant, j.Image)
		}
	}
	return nonCompliant, failed
}
