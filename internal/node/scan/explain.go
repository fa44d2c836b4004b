package scan

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Explain is a judgement as the node's report keeps it: the verdict with
// the findings that decided it (the first report.MaxFindings, and the count
// of the rest), and a line that says why in words.
func (j Judgement) Explain() (workerresult.Scan, string) {
	s, why := j.explain()
	if j.From != nil {
		why += " (verdict shared by node " + j.From.Node
		if j.From.ConfirmedBy != "" {
			why += ", confirmed by node " + j.From.ConfirmedBy
		}
		why += ")"
	}
	return s, why
}

func (j Judgement) explain() (workerresult.Scan, string) {
	s := workerresult.Scan{Verdict: string(j.Verdict), Remove: j.Remove, EndOfLife: j.EndOfLife, From: j.From}
	for i, f := range j.Findings {
		if i == workerresult.MaxFindings {
			s.MoreFindings = len(j.Findings) - i
			break
		}
		s.Findings = append(s.Findings, workerresult.Finding{ID: f.ID, Severity: f.Severity, Package: f.Package, FixedVersion: f.FixedVersion})
	}
	s.MoreFindings += j.More
	switch j.Verdict {
	case Vulnerable:
		parts := make([]string, 0, min(3, len(j.Findings)))
		for _, f := range j.Findings[:min(3, len(j.Findings))] {
			part := fmt.Sprintf("%s %s %s", f.ID, f.Severity, f.Package)
			if f.FixedVersion != "" {
				part += " (fixed in " + f.FixedVersion + ")"
			}
			parts = append(parts, part)
		}
		why := strings.Join(parts, ", ")
		if n := len(j.Findings) - len(parts) + j.More; n > 0 {
			why += fmt.Sprintf(" (+%d more)", n)
		}
		return s, why
	case EndOfLife:
		if j.Remove {
			return s, "its OS is end of life (deleteEOLImages is on)"
		}
		return s, "its OS is end of life; kept (deleteEOLImages is off)"
	case Clean:
		return s, "no finding matched the policy"
	case Unsupported:
		return s, "the scanner cannot judge this image (a Windows image, or no OS and no packages it knows); kept"
	case NotScanned:
		if j.Error != "" {
			return s, j.Error + "; kept"
		}
		return s, "the scan's total timeout ran out before this image; kept"
	case Failed:
		if j.Remove {
			return s, j.Error + " (deleteFailedImages is on)"
		}
		return s, j.Error + "; kept"
	}
	return s, j.Error
}

// LogResult writes the judgement's result line, the one line per image the
// node's report reads from the scanner's log (nodereport.Line), with
// the verdict and what decided it. It returns the line's reason in words.
func LogResult(log *slog.Logger, j Judgement) string {
	verdict, why := j.Explain()
	nodereport.Line{Outcome: workerresult.ScanOutcome(string(j.Verdict)), Target: j.Image.ImageID,
		Image: j.Image.ImageID, Names: j.Image.Names, Detail: why, Scan: &verdict}.Log(context.Background(), log, slog.LevelInfo)
	return why
}
