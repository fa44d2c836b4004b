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
// judge any.
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
	case strings.HasPrefix(n, "vuln"):
		return Report{Findings: []Finding{{ID: "CVE-1", Severity: "HIGH", Package: "musl", FixedVersion: "2"}}}, nil
	}
	return Report{}, nil
}

func TestRunShared(t *testing.T) {
	from := scanshare.Verdict{Node: "node-b", Pod: "eraser-node-b-x"}
	sharedVuln := from
	sharedVuln.Scan = workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: []workerresult.Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}}, MoreFindings: 7}
	sharedClean := from
	sharedClean.Scan = workerresult.Scan{Verdict: "clean"}
	type result struct {
		Verdicts map[string]string // image: verdict, and "shared" when it was
		Scanned  []string
		Shared   []string
		Released []string
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
			want:   result{Verdicts: map[string]string{"vuln-a": "vulnerable shared", "clean-b": "clean shared"}},
		},
		"what the service hands over is scanned and shared": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("clean-b"): sharedClean}, grant: 1},
			images: []string{"vuln-a", "clean-b", "clean-c"},
			want: result{
				Verdicts: map[string]string{"vuln-a": "vulnerable", "clean-b": "clean shared", "clean-c": "clean"},
				Scanned:  []string{"vuln-a", "clean-c"}, Shared: []string{"vuln-a vulnerable", "clean-c clean"},
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
			want:   result{Verdicts: map[string]string{"vuln-a": "vulnerable shared"}},
		},
		"no DB: shared verdicts judge, the rest kept unjudged and no more claimed": {
			svc:    &fakeService{verdicts: map[string]scanshare.Verdict{digestOf("vuln-a"): sharedVuln}, grant: 1},
			images: []string{"vuln-a", "clean-b", "clean-c"},
			noDB:   true,
			want: result{
				Verdicts: map[string]string{"vuln-a": "vulnerable shared", "clean-b": "not scanned", "clean-c": "not scanned"},
				Scanned:  []string{"clean-b", "clean-c"}, Released: []string{"clean-b"},
			},
		},
		"the service down: every image scanned here": {
			svc:    &fakeService{down: true},
			images: []string{"vuln-a", "clean-b"},
			want:   result{Verdicts: map[string]string{"vuln-a": "vulnerable", "clean-b": "clean"}, Scanned: []string{"vuln-a", "clean-b"}},
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
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSharedVerdictExplained: a shared verdict keeps its findings' count
// and says where it was made, in the report's terms.
func TestSharedVerdictExplained(t *testing.T) {
	j := Judgement{Verdict: Vulnerable, Remove: true, Findings: []Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}}, More: 7,
		From: &workerresult.Origin{Node: "node-b", Pod: "eraser-node-b-x"}}
	s, why := j.Explain()
	want := workerresult.Scan{Verdict: "vulnerable", Remove: true, Findings: []workerresult.Finding{{ID: "CVE-9", Severity: "CRITICAL", Package: "openssl"}},
		MoreFindings: 7, From: &workerresult.Origin{Node: "node-b", Pod: "eraser-node-b-x"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if why != "CVE-9 CRITICAL openssl (+7 more) (verdict shared by node node-b)" {
		t.Errorf("why = %q", why)
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
