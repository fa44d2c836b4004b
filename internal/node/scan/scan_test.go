package scan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

var img = handoff.Image{ImageID: "sha256:1", Names: []string{"alpine:3.7"}}

func TestJudge(t *testing.T) {
	crit := Finding{ID: "CVE-1", Package: "musl", Severity: "CRITICAL", FixedVersion: "1.2", Status: "fixed", Type: "os"}
	lowUnfixed := Finding{ID: "CVE-2", Package: "zlib", Severity: "LOW", Status: "affected", Type: "os"}
	lib := Finding{ID: "GHSA-3", Package: "lodash", Severity: "HIGH", FixedVersion: "4.17.21", Status: "fixed", Type: "library"}
	wontFix := Finding{ID: "CVE-4", Package: "bash", Severity: "HIGH", Status: "will_not_fix", Type: "os"}
	all := Policy{Severities: []string{"CRITICAL", "HIGH", "MEDIUM", "LOW"}, Types: []string{"os", "library"}}
	byDigest := handoff.Image{ImageID: "sha256:" + strings.Repeat("c", 64), Names: []string{"example.com/app:dev"}}
	other := "sha256:" + strings.Repeat("d", 64)
	cases := map[string]struct {
		img        handoff.Image
		policy     Policy
		report     Report
		err        error
		wantV      Verdict
		wantRemove bool
		wantIDs    []string
	}{
		"clean":                     {policy: all, wantV: Clean},
		"vulnerable":                {policy: all, report: Report{Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"severity filtered":         {policy: Policy{Severities: []string{"CRITICAL"}}, report: Report{Findings: []Finding{lowUnfixed, lib}}, wantV: Clean},
		"severity case":             {policy: Policy{Severities: []string{"critical"}}, report: Report{Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"ignore unfixed":            {policy: Policy{IgnoreUnfixed: true}, report: Report{Findings: []Finding{lowUnfixed}}, wantV: Clean},
		"unfixed counts":            {policy: all, report: Report{Findings: []Finding{lowUnfixed}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-2"}},
		"os only":                   {policy: Policy{Types: []string{"os"}}, report: Report{Findings: []Finding{lib}}, wantV: Clean},
		"ignored status":            {policy: Policy{IgnoredStatuses: []string{"will_not_fix"}}, report: Report{Findings: []Finding{wontFix, crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"eol kept by default":       {policy: all, report: Report{EndOfLife: true}, wantV: EndOfLife},
		"eol removed on request":    {policy: Policy{DeleteEOL: true}, report: Report{EndOfLife: true}, wantV: EndOfLife, wantRemove: true},
		"vulnerable beats eol":      {policy: all, report: Report{EndOfLife: true, Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"unsupported kept":          {policy: Policy{DeleteFailed: true, DeleteEOL: true}, report: Report{Unsupported: true, Findings: []Finding{crit}}, wantV: Unsupported},
		"failed kept":               {policy: all, err: errors.New("db missing"), wantV: Failed},
		"failed removed opt-in":     {policy: Policy{DeleteFailed: true}, err: errors.New("db missing"), wantV: Failed, wantRemove: true},
		"no DB kept despite opt-in": {policy: Policy{DeleteFailed: true}, err: fmt.Errorf("%w: the run's DB did not arrive", ErrCannotJudge), wantV: NotScanned},
		"the image's own content":   {img: byDigest, policy: all, report: Report{Content: byDigest.ImageID, Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"content not said":          {img: byDigest, policy: all, report: Report{Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"other content not judged":  {img: byDigest, policy: Policy{DeleteFailed: true, DeleteEOL: true}, report: Report{Content: other, EndOfLife: true, Findings: []Finding{crit}}, wantV: NotScanned},
		"other content, CRI-O's ID": {img: handoff.Image{ImageID: strings.Repeat("c", 64)}, policy: all, report: Report{Content: other, Findings: []Finding{crit}}, wantV: NotScanned},
		"same content, CRI-O's ID":  {img: handoff.Image{ImageID: strings.Repeat("c", 64)}, policy: all, report: Report{Content: byDigest.ImageID, Findings: []Finding{crit}}, wantV: Vulnerable, wantRemove: true, wantIDs: []string{"CVE-1"}},
		"source refused other content kept despite opt-in": {img: byDigest, policy: Policy{DeleteFailed: true},
			err: fmt.Errorf("example.com/app:dev: %w", ErrOtherContent), wantV: NotScanned},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			image := img
			if tc.img.ImageID != "" {
				image = tc.img
			}
			j := tc.policy.Judge(image, tc.report, tc.err)
			var ids []string
			for _, f := range j.Findings {
				ids = append(ids, f.ID)
			}
			got := struct {
				V      Verdict
				Remove bool
				IDs    []string
			}{j.Verdict, j.Remove, ids}
			want := struct {
				V      Verdict
				Remove bool
				IDs    []string
			}{tc.wantV, tc.wantRemove, tc.wantIDs}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// scriptedEngine finds a vulnerability in every image, fails on "bad",
// waits for its context on "block", and calls onScan first.
type scriptedEngine struct{ onScan func(handoff.Image) }

func (e scriptedEngine) Scan(ctx context.Context, img handoff.Image) (Report, error) {
	if e.onScan != nil {
		e.onScan(img)
	}
	switch img.ImageID {
	case "bad":
		return Report{}, errors.New("broken layer")
	case "block":
		<-ctx.Done()
		return Report{}, ctx.Err()
	}
	return Report{Findings: []Finding{{ID: "CVE-9", Severity: "HIGH"}}}, nil
}

// TestRunTimeouts: when the total budget ends, the image being scanned and
// the rest are NotScanned and kept; a per-image timeout is a failed scan,
// kept unless deleteFailed.
func TestRunTimeouts(t *testing.T) {
	images := []handoff.Image{{ImageID: "a"}, {ImageID: "bad"}, {ImageID: "block"}, {ImageID: "d"}}
	ctx, endBudget := context.WithCancel(context.Background())
	defer endBudget()
	engine := scriptedEngine{onScan: func(img handoff.Image) {
		if img.ImageID == "block" {
			endBudget() // the total timeout, as it would strike mid-scan
		}
	}}
	js := Run(ctx, engine, images, Policy{}, time.Hour, time.Hour)
	var got []Verdict
	for _, j := range js {
		got = append(got, j.Verdict)
	}
	if diff := cmp.Diff([]Verdict{Vulnerable, Failed, NotScanned, NotScanned}, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	nonCompliant, failed := Split(js)
	if len(nonCompliant) != 1 || len(failed) != 0 {
		t.Errorf("to remove: %v, failed %v", nonCompliant, failed)
	}

	js = Run(context.Background(), scriptedEngine{}, []handoff.Image{{ImageID: "block"}}, Policy{DeleteFailed: true}, time.Millisecond, time.Hour)
	if js[0].Verdict != Failed || !js[0].Remove {
		t.Errorf("per-image timeout: %+v", js[0])
	}
	_, failed = Split(js)
	if len(failed) != 1 {
		t.Errorf("failed images to remove: %v", failed)
	}
}

// TestDefaultPolicy: by default failed scans are kept and end-of-life
// images removed, as upstream.
func TestDefaultPolicy(t *testing.T) {
	if p := PolicyOf(scanconfig.DefaultConfig()); p.DeleteFailed || !p.DeleteEOL {
		t.Errorf("default policy %+v: failed scans must be kept, EOL removed as upstream", p)
	}
}
