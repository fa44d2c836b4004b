package scan

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func TestExplain(t *testing.T) {
	var many []Finding
	var first []workerresult.Finding
	for i := range 8 {
		f := Finding{ID: fmt.Sprintf("CVE-2026-%d", i), Package: "openssl", Severity: "HIGH", FixedVersion: "3.0.13", Status: "fixed", Type: "os"}
		many = append(many, f)
		if i < workerresult.MaxFindings {
			first = append(first, workerresult.Finding{ID: f.ID, Severity: "HIGH", Package: "openssl", FixedVersion: "3.0.13"})
		}
	}
	for name, tc := range map[string]struct {
		j       Judgement
		want    workerresult.Scan
		wantWhy string
	}{
		"vulnerable, bounded": {
			j:       Judgement{Verdict: Vulnerable, Remove: true, Findings: many, EndOfLife: true},
			want:    workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: first, MoreFindings: 3, EndOfLife: true},
			wantWhy: "CVE-2026-0 HIGH openssl (fixed in 3.0.13), CVE-2026-1 HIGH openssl (fixed in 3.0.13), CVE-2026-2 HIGH openssl (fixed in 3.0.13) (+5 more)",
		},
		"vulnerable, unfixed": {
			j:       Judgement{Verdict: Vulnerable, Remove: true, Findings: []Finding{{ID: "CVE-1", Package: "zlib", Severity: "CRITICAL"}}},
			want:    workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: []workerresult.Finding{{ID: "CVE-1", Severity: "CRITICAL", Package: "zlib"}}},
			wantWhy: "CVE-1 CRITICAL zlib",
		},
		"end of life, kept": {
			j:    Judgement{Verdict: EndOfLife, EndOfLife: true},
			want: workerresult.Scan{Verdict: "end-of-life", EndOfLife: true}, wantWhy: "its OS is end of life; kept (deleteEOLImages is off)",
		},
		"end of life, removed": {
			j:    Judgement{Verdict: EndOfLife, EndOfLife: true, Remove: true},
			want: workerresult.Scan{Verdict: "end-of-life", EndOfLife: true, Remove: true}, wantWhy: "its OS is end of life (deleteEOLImages is on)",
		},
		"clean":       {j: Judgement{Verdict: Clean}, want: workerresult.Scan{Verdict: "clean"}, wantWhy: "no finding matched the policy"},
		"not scanned": {j: Judgement{Verdict: NotScanned}, want: workerresult.Scan{Verdict: "not scanned"}, wantWhy: "the scan's total timeout ran out before this image; kept"},
		"not scanned, and why": {j: Judgement{Verdict: NotScanned, Error: "this scanner cannot judge: no DB"}, want: workerresult.Scan{Verdict: "not scanned"},
			wantWhy: "this scanner cannot judge: no DB; kept"},
		"unsupported": {j: Judgement{Verdict: Unsupported}, want: workerresult.Scan{Verdict: "unsupported"},
			wantWhy: "the scanner cannot judge this image (a Windows image, or no OS and no packages it knows); kept"},
		"failed, kept": {j: Judgement{Verdict: Failed, Error: "reading the image config: EOF"}, want: workerresult.Scan{Verdict: "failed"},
			wantWhy: "reading the image config: EOF; kept"},
		"failed, removed": {j: Judgement{Verdict: Failed, Remove: true, Error: "layer missing"}, want: workerresult.Scan{Verdict: "failed", Remove: true},
			wantWhy: "layer missing (deleteFailedImages is on)"},
	} {
		t.Run(name, func(t *testing.T) {
			got, why := tc.j.Explain()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scan (-want +got):\n%s", diff)
			}
			if why != tc.wantWhy {
				t.Errorf("why %q, want %q", why, tc.wantWhy)
			}
		})
	}
}

// TestLogResultReadByTheReport: the scanner's result lines, written through
// the workers' logger as the scanner container writes them, are what the
// node's report reads back: each image's verdict, what decided it (bounded
// findings) and the words that say why, in the order judged.
func TestLogResultReadByTheReport(t *testing.T) {
	var findings []Finding
	var first []workerresult.Finding
	for i := range 7 {
		f := Finding{ID: fmt.Sprintf("CVE-2099-000%d", i+1), Package: "musl", Severity: "CRITICAL", FixedVersion: "1.2.5-r0"}
		findings = append(findings, f)
		if i < workerresult.MaxFindings {
			first = append(first, workerresult.Finding{ID: f.ID, Severity: "CRITICAL", Package: "musl", FixedVersion: "1.2.5-r0"})
		}
	}
	img := func(name, id string) handoff.Image { return handoff.Image{ImageID: id, Names: []string{name}} }
	var out bytes.Buffer
	log := logging.NewWorker(&out, "info", "trivy-scanner")
	for _, j := range []Judgement{
		{Image: img("docker.io/library/alpine:3.15", "sha256:aa"), Verdict: Vulnerable, Remove: true, Findings: findings},
		{Image: img("docker.io/library/debian:9", "sha256:bb"), Verdict: EndOfLife, EndOfLife: true},
		{Image: img("docker.io/library/nginx:1.27", "sha256:cc"), Verdict: Clean},
		{Image: img("docker.io/library/broken:1", "sha256:dd"), Verdict: Failed, Error: "reading the image config: EOF"},
	} {
		LogResult(log, j)
	}
	got, more, err := nodereport.ParseLog(&out, 10)
	if err != nil || more != 0 {
		t.Fatalf("ParseLog: %d more, %v", more, err)
	}
	want := []nodereport.Entry{
		{Image: "docker.io/library/alpine:3.15", ID: "sha256:aa", Outcome: "vulnerable",
			Detail: "CVE-2099-0001 CRITICAL musl (fixed in 1.2.5-r0), CVE-2099-0002 CRITICAL musl (fixed in 1.2.5-r0), CVE-2099-0003 CRITICAL musl (fixed in 1.2.5-r0) (+4 more)",
			Scan:   &workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: first, MoreFindings: 2}},
		{Image: "docker.io/library/debian:9", ID: "sha256:bb", Outcome: "end-of-life", Detail: "its OS is end of life; kept (deleteEOLImages is off)",
			Scan: &workerresult.Scan{Verdict: "end-of-life", EndOfLife: true}},
		{Image: "docker.io/library/nginx:1.27", ID: "sha256:cc", Outcome: "clean", Detail: "no finding matched the policy",
			Scan: &workerresult.Scan{Verdict: "clean"}},
		{Image: "docker.io/library/broken:1", ID: "sha256:dd", Outcome: "scan failed", Detail: "reading the image config: EOF; kept",
			Scan: &workerresult.Scan{Verdict: "failed"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the report's entries (-want +got):\n%s", diff)
	}
}
