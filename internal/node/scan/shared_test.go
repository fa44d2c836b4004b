package scan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// fakeService answers claims from its verdicts, hands out at most grant
// keys per claim, and says wait for the keys in busy until a verdict for
// them arrives from elsewhere (arrive, after each claim).
type fakeService struct {
	mu       sync.Mutex
	verdicts map[string]scanshare.Verdict // by digest
	busy     map[string]bool
	arrive   map[string]scanshare.Verdict
	grant    int
	down     bool
	shared   []string // verdicts shared, "digest verdict"
	released []string
	claims   int
}

func (f *fakeService) Claim(_ context.Context, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if f.down {
		return scanshare.ClaimResponse{}, errors.New("connection refused")
	}
	var out scanshare.ClaimResponse
	for _, k := range req.Keys {
		switch v, ok := f.verdicts[k.Digest]; {
		case ok:
			v.Key = k
			out.Verdicts = append(out.Verdicts, v)
		case f.busy[k.Digest]:
			out.Wait = append(out.Wait, k)
		case len(out.Scan) < f.grant:
			out.Scan = append(out.Scan, k)
		default:
			out.Wait = append(out.Wait, k)
		}
	}
	for d, v := range f.arrive {
		f.verdicts[d] = v
		delete(f.busy, d)
	}
	return out, nil
}

func (f *fakeService) Share(_ context.Context, req scanshare.ShareRequest) (scanshare.ShareResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range req.Verdicts {
		f.shared = append(f.shared, name(v.Key.Digest)+" "+v.Scan.Verdict)
	}
	for _, k := range req.Released {
		f.released = append(f.released, name(k.Digest))
	}
	return scanshare.ShareResponse{Stored: len(req.Verdicts)}, nil
}

func digestOf(n string) string { return fmt.Sprintf("sha256:%064x", n) }

func name(digest string) string {
	var b []byte
	_, _ = fmt.Sscanf(strings.TrimPrefix(digest, "sha256:"), "%x", &b)
	return strings.TrimLeft(string(b), "\x00")
}

// countingEngine finds CVE-1 in images named vuln*, fails on bad*, finds
// nothing in the rest, and records what it scanned; with noDB it cannot
// judge any. It reports judging the image's own content, except for
// images named *moved*, whose name led it to other content, and *unsaid*,
// whose content it does not name.
type countingEngine struct {
	mu      sync.Mutex
	scanned []string
	noDB    bool
}

func (e *countingEngine) Scan(_ context.Context, img handoff.Image) (Report, error) {
	n := img.Names[0]
	e.mu.Lock()
	e.scanned = append(e.scanned, n)
	e.mu.Unlock()
	switch {
	case e.noDB:
		return Report{}, fmt.Errorf("%w: the run's DB did not arrive", ErrCannotJudge)
	case strings.HasPrefix(n, "bad"):
		return Report{}, errors.New("layer missing")
	}
	var r Report
	switch {
	case strings.Contains(n, "moved"):
		r.Content = digestOf("other content")
	case !strings.Contains(n, "unsaid"):
		r.Content = img.ImageID
	}
	if strings.HasPrefix(n, "vuln") {
		r.Findings = []Finding{{ID: "CVE-1", Severity: "HIGH", Package: "musl", FixedVersion: "2"}}
	}
	return r, nil
}

func TestRunShared(t *testing.T) {
	const cannot = "this scanner cannot judge: the run's DB did not arrive; kept"
	otherContent := "the scanner judged content " + digestOf("other content") + ", not the image's; kept"
	from := scanshare.Verdict{Node: "node-b", Pod: "eraser-node-b-x"}
	sharedVuln := from
	sharedVuln.Scan = workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: []workerresult.Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}}, MoreFindings: 7}
	sharedClean := from
	sharedClean.Scan = workerresult.Scan{Verdict: "clean"}
	noEvidence := from
	noEvidence.Scan = workerresult.Scan{Verdict: "vulnerable", Remove: true}
	type result struct {
		Verdicts map[string]string // image: verdict, and "shared" when it was
		Removed  []string
		Scanned  []string
		Shared   []string
		Released []string
		// Why is the reason of each image not scanned.
		Why map[string]string
	}
	for name, tc := range map[string]struct {
		svc    *fakeService
		images []string
		noDB   bool
		want   result
	}{
		"every verdict known: nothing scanned": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("vuln-a"): sharedVuln, digestOf("clean-b"): sharedClean}, grant: 2},
			images: []string{"vuln-a", "clean-b"},
			want:   result{Verdicts: map[string]string{"vuln-a": "vulnerable shared", "clean-b": "clean shared"}, Removed: []string{"vuln-a"}},
		},
		"what the service hands over is scanned and shared": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("clean-b"): sharedClean}, grant: 1},
			images: []string{"vuln-a", "clean-b", "clean-c"},
			want: result{
				Verdicts: map[string]string{"vuln-a": "vulnerable", "clean-b": "clean shared", "clean-c": "clean"}, Removed: []string{"vuln-a"},
				Scanned: []string{"vuln-a", "clean-c"}, Shared: []string{"vuln-a vulnerable", "clean-c clean"},
			},
		},
		"a failed scan is released, not shared": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{}, grant: 5},
			images: []string{"bad-a"},
			want:   result{Verdicts: map[string]string{"bad-a": "failed"}, Scanned: []string{"bad-a"}, Released: []string{"bad-a"}},
		},
		"a verdict another node is making is waited for": {
			svc: &fakeService{verdicts: map[string]scanshare.Verdict{}, busy: map[string]bool{digestOf("vuln-a"): true},
				arrive: map[string]scanshare.Verdict{digestOf("vuln-a"): sharedVuln}, grant: 5},
			images: []string{"vuln-a"},
			want:   result{Verdicts: map[string]string{"vuln-a": "vulnerable shared"}, Removed: []string{"vuln-a"}},
		},
		"no DB: shared verdicts judge, the rest kept unjudged and no more claimed": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("vuln-a"): sharedVuln}, grant: 1},
			images: []string{"vuln-a", "clean-b", "clean-c"},
			noDB:   true,
			want: result{
				Verdicts: map[string]string{"vuln-a": "vulnerable shared", "clean-b": "not scanned", "clean-c": "not scanned"}, Removed: []string{"vuln-a"},
				Scanned: []string{"clean-b", "clean-c"}, Released: []string{"clean-b"},
				Why: map[string]string{"clean-b": cannot, "clean-c": cannot},
			},
		},
		"the service down: every image scanned here": {
			svc:    &fakeService{down: true},
			images: []string{"vuln-a", "clean-b"},
			want: result{Verdicts: map[string]string{"vuln-a": "vulnerable", "clean-b": "clean"}, Removed: []string{"vuln-a"},
				Scanned: []string{"vuln-a", "clean-b"}},
		},
		"the service down and no DB: every image kept, saying why": {
			svc:    &fakeService{down: true},
			images: []string{"vuln-a", "clean-b"},
			noDB:   true,
			want: result{Verdicts: map[string]string{"vuln-a": "not scanned", "clean-b": "not scanned"}, Scanned: []string{"vuln-a", "clean-b"},
				Why: map[string]string{"vuln-a": cannot, "clean-b": cannot}},
		},
		"a name moved to other content: not judged, not shared": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{}, grant: 5},
			images: []string{"vuln-moved", "clean-moved"},
			want: result{Verdicts: map[string]string{"vuln-moved": "not scanned", "clean-moved": "not scanned"},
				Scanned: []string{"vuln-moved", "clean-moved"}, Released: []string{"vuln-moved", "clean-moved"},
				Why: map[string]string{"vuln-moved": otherContent, "clean-moved": otherContent}},
		},
		"a name moved, the service down: not judged here either": {
			svc:    &fakeService{down: true},
			images: []string{"vuln-moved"},
			want: result{Verdicts: map[string]string{"vuln-moved": "not scanned"}, Scanned: []string{"vuln-moved"},
				Why: map[string]string{"vuln-moved": otherContent}},
		},
		"content not named: not judged, not shared": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{}, grant: 5},
			images: []string{"vuln-unsaid"},
			want: result{Verdicts: map[string]string{"vuln-unsaid": "not scanned"}, Scanned: []string{"vuln-unsaid"}, Released: []string{"vuln-unsaid"},
				Why: map[string]string{"vuln-unsaid": "the scanner did not say which content it judged; kept"}},
		},
		"a shared vulnerable verdict without findings: scanned here instead": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("clean-b"): noEvidence}, grant: 5},
			images: []string{"clean-b"},
			want:   result{Verdicts: map[string]string{"clean-b": "clean"}, Scanned: []string{"clean-b"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var imgs []handoff.Image
			for _, n := range tc.images {
				imgs = append(imgs, handoff.Image{ImageID: digestOf(n), Names: []string{n}})
			}
			e := &countingEngine{noDB: tc.noDB}
			sh := Sharing{Service: tc.svc, DB: digestOf("db"), Platform: "linux/amd64", Policy: strings.Repeat("0", 64),
				Patience: time.Minute, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			js := RunShared(context.Background(), e, imgs, Policy{}, 0, time.Hour, sh)
			got := result{Verdicts: map[string]string{}, Scanned: e.scanned, Shared: tc.svc.shared, Released: tc.svc.released}
			for _, j := range js {
				v := string(j.Verdict)
				if j.From != nil {
					v += " shared"
				}
				got.Verdicts[j.Image.Names[0]] = v
				if j.Remove {
					got.Removed = append(got.Removed, j.Image.Names[0])
				}
				if _, why := j.Explain(); j.Verdict == NotScanned {
					if got.Why == nil {
						got.Why = map[string]string{}
					}
					got.Why[j.Image.Names[0]] = why
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSharedJudgement(t *testing.T) {
	image := handoff.Image{ImageID: digestOf("a"), Names: []string{"a"}}
	finding := workerresult.Finding{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}
	type judged struct {
		Verdict  Verdict
		Remove   bool
		Findings int
	}
	for name, tc := range map[string]struct {
		scan   workerresult.Scan
		policy Policy
		want   judged
	}{
		"vulnerable with a finding removes":    {scan: workerresult.Scan{Verdict: "vulnerable", Findings: []workerresult.Finding{finding}}, want: judged{Vulnerable, true, 1}},
		"vulnerable without findings keeps":    {scan: workerresult.Scan{Verdict: "vulnerable", Remove: true}, want: judged{Vulnerable, false, 0}},
		"vulnerable counting only unlisted":    {scan: workerresult.Scan{Verdict: "vulnerable", Remove: true, MoreFindings: 4}, want: judged{Vulnerable, false, 0}},
		"end of life, kept by this policy":     {scan: workerresult.Scan{Verdict: "end-of-life", Remove: true, EndOfLife: true}, want: judged{EndOfLife, false, 0}},
		"end of life, removed by this policy":  {scan: workerresult.Scan{Verdict: "end-of-life", EndOfLife: true}, policy: Policy{DeleteEOL: true}, want: judged{EndOfLife, true, 0}},
		"clean, whatever the verdict's Remove": {scan: workerresult.Scan{Verdict: "clean", Remove: true}, want: judged{Clean, false, 0}},
		"unsupported keeps":                    {scan: workerresult.Scan{Verdict: "unsupported", Remove: true}, policy: Policy{DeleteFailed: true, DeleteEOL: true}, want: judged{Unsupported, false, 0}},
	} {
		t.Run(name, func(t *testing.T) {
			j := sharedJudgement(image, scanshare.Verdict{Scan: tc.scan, Node: "node-b"}, tc.policy)
			if diff := cmp.Diff(tc.want, judged{j.Verdict, j.Remove, len(j.Findings)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSharedVerdictExplained: a shared verdict keeps its findings' count
// and says where it was made, and which node confirmed it, in the report's
// terms.
func TestSharedVerdictExplained(t *testing.T) {
	origin := &workerresult.Origin{Node: "node-b", Pod: "eraser-node-b-x", ConfirmedBy: "node-c"}
	j := Judgement{Verdict: Vulnerable, Remove: true, Findings: []Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}}, More: 7,
		From: origin}
	s, why := j.Explain()
	want := workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: []workerresult.Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}},
		MoreFindings: 7, From: origin}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if why != "CVE-9 CRITICAL openssl (+7 more) (verdict shared by node node-b, confirmed by node node-c)" {
		t.Errorf("why = %q", why)
	}
	if got := sharedJudgement(handoff.Image{ImageID: "x"}, scanshare.Verdict{Node: "node-b", Pod: "eraser-node-b-x", ConfirmedBy: "node-c", Scan: s}, Policy{}); !cmp.Equal(got.From, origin) {
		t.Errorf("a shared verdict's origin: %+v, want %+v", got.From, origin)
	}
}

func TestPolicyKey(t *testing.T) {
	base := PolicyKey("trivy/0.60", Policy{Severities: []string{"HIGH", "CRITICAL"}, Types: []string{"os"}})
	for name, tc := range map[string]struct {
		engine string
		p      Policy
		same   bool
	}{
		"the same policy in another order and case": {engine: "trivy/0.60", p: Policy{Severities: []string{"critical", "HIGH"}, Types: []string{"OS"}}, same: true},
		"another severity":                          {engine: "trivy/0.60", p: Policy{Severities: []string{"CRITICAL"}, Types: []string{"os"}}},
		"ignore unfixed":                            {engine: "trivy/0.60", p: Policy{Severities: []string{"HIGH", "CRITICAL"}, Types: []string{"os"}, IgnoreUnfixed: true}},
		"end-of-life images removed":                {engine: "trivy/0.60", p: Policy{Severities: []string{"HIGH", "CRITICAL"}, Types: []string{"os"}, DeleteEOL: true}},
		"another engine version":                    {engine: "trivy/0.61", p: Policy{Severities: []string{"HIGH", "CRITICAL"}, Types: []string{"os"}}},
	} {
		if got := PolicyKey(tc.engine, tc.p) == base; got != tc.same {
			t.Errorf("%s: same key = %v, want %v", name, got, tc.same)
		}
	}
}
