package scanservice

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func key(i int) scanshare.Key {
	return scanshare.Key{
		Digest:   fmt.Sprintf("sha256:%064x", i),
		Platform: "linux/amd64",
		DB:       "sha256:" + strings.Repeat("d", 64),
		Policy:   strings.Repeat("0", 64),
	}
}

var (
	nodeA = Scanner{Node: "node-a", Pod: "pod-a", PodUID: "uid-a"}
	nodeB = Scanner{Node: "node-b", Pod: "pod-b", PodUID: "uid-b"}
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newStore(c *clock) *Verdicts {
	return NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2, Now: c.now})
}

func clean(k scanshare.Key) scanshare.Shared {
	return scanshare.Shared{Key: k, Scan: workerresult.Scan{Verdict: "clean"}}
}

// answer is a claim response by key index, for readable diffs.
type answer struct{ Verdicts, Scan, Wait []int }

func indexes(keys []scanshare.Key) []int {
	var out []int
	for _, k := range keys {
		var i int
		_, _ = fmt.Sscanf(strings.TrimPrefix(k.Digest, "sha256:"), "%x", &i)
		out = append(out, i)
	}
	return out
}

func summarize(r scanshare.ClaimResponse) answer {
	var a answer
	for _, v := range r.Verdicts {
		a.Verdicts = append(a.Verdicts, indexes([]scanshare.Key{v.Key})...)
	}
	a.Scan, a.Wait = indexes(r.Scan), indexes(r.Wait)
	return a
}

func keys(is ...int) []scanshare.Key {
	out := make([]scanshare.Key, 0, len(is))
	for _, i := range is {
		out = append(out, key(i))
	}
	return out
}

func TestClaim(t *testing.T) {
	for name, tc := range map[string]struct {
		// before: node B claims these, then shares the verdicts of shared.
		claimedByB, sharedByB []int
		// later moves the clock before node A asks.
		later time.Duration
		ask   []int
		want  answer
	}{
		"nothing known: the grant is scanned, the rest waits": {
			ask:  []int{1, 2, 3},
			want: answer{Scan: []int{1, 2}, Wait: []int{3}},
		},
		"a verdict is served, the grant goes to the rest": {
			claimedByB: []int{1}, sharedByB: []int{1},
			ask:  []int{1, 2, 3, 4},
			want: answer{Verdicts: []int{1}, Scan: []int{2, 3}, Wait: []int{4}},
		},
		"another scanner's claim is waited for": {
			claimedByB: []int{1, 2},
			ask:        []int{1, 2, 3},
			want:       answer{Scan: []int{3}, Wait: []int{1, 2}},
		},
		"a claim past its lease is taken over": {
			claimedByB: []int{1},
			later:      2 * time.Minute,
			ask:        []int{1},
			want:       answer{Scan: []int{1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := &clock{t: time.Unix(1e9, 0)}
			s := newStore(c)
			if len(tc.claimedByB) > 0 {
				s.Claim(nodeB, keys(tc.claimedByB...), time.Second)
			}
			var shared []scanshare.Shared
			for _, i := range tc.sharedByB {
				shared = append(shared, clean(key(i)))
			}
			s.Share(nodeB, scanshare.ShareRequest{Verdicts: shared})
			c.t = c.t.Add(tc.later)
			got := summarize(s.Claim(nodeA, keys(tc.ask...), time.Second))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("claim (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShare(t *testing.T) {
	invalid := key(9)
	invalid.Digest = "sha256:nothex"
	tooMany := clean(key(5))
	for i := range workerresult.MaxFindings + 1 {
		tooMany.Scan.Findings = append(tooMany.Scan.Findings, workerresult.Finding{ID: fmt.Sprint("CVE-", i)})
	}
	for name, tc := range map[string]struct {
		// node B claims claimedByB first, and releases released.
		claimedByB, released []int
		share                []scanshare.Shared
		wantStored           int
		wantRefused          []string
	}{
		"a verdict nobody holds is kept": {
			share: []scanshare.Shared{clean(key(1))}, wantStored: 1,
		},
		"a key another scanner holds is refused": {
			claimedByB:  []int{1},
			share:       []scanshare.Shared{clean(key(1))},
			wantRefused: []string{"another scanner holds the claim on this key"},
		},
		"a released key is anyone's": {
			claimedByB: []int{1}, released: []int{1},
			share: []scanshare.Shared{clean(key(1))}, wantStored: 1,
		},
		"a failed scan is not shared": {
			share:       []scanshare.Shared{{Key: key(1), Scan: workerresult.Scan{Verdict: "failed"}}},
			wantRefused: []string{"verdict failed is not shared"},
		},
		"an invalid key is refused": {
			share:       []scanshare.Shared{clean(invalid)},
			wantRefused: []string{`digest: "sha256:nothex" is not a sha256 digest`},
		},
		"more findings than a scanner keeps are refused": {
			share:       []scanshare.Shared{tooMany},
			wantRefused: []string{"6 findings: a verdict carries at most 5"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(&clock{t: time.Unix(1e9, 0)})
			if len(tc.claimedByB) > 0 {
				s.Claim(nodeB, keys(tc.claimedByB...), time.Second)
				s.Share(nodeB, scanshare.ShareRequest{Released: keys(tc.released...)})
			}
			got := s.Share(nodeA, scanshare.ShareRequest{Verdicts: tc.share})
			var refused []string
			for _, r := range got.Refused {
				refused = append(refused, r.Reason)
			}
			if diff := cmp.Diff(tc.wantRefused, refused); diff != "" || got.Stored != tc.wantStored {
				t.Errorf("stored %d, want %d; refused (-want +got):\n%s", got.Stored, tc.wantStored, diff)
			}
		})
	}
}

// TestFirstVerdictStays: a second scanner cannot replace a verdict, and
// the one served says who made it.
func TestFirstVerdictStays(t *testing.T) {
	s := newStore(&clock{t: time.Unix(1e9, 0)})
	s.Share(nodeB, scanshare.ShareRequest{Verdicts: []scanshare.Shared{clean(key(1))}})
	vuln := clean(key(1))
	vuln.Scan.Verdict = "vulnerable"
	if got := s.Share(nodeA, scanshare.ShareRequest{Verdicts: []scanshare.Shared{vuln}}); got.Stored != 0 {
		t.Fatalf("a second verdict was stored: %+v", got)
	}
	r := s.Claim(nodeA, keys(1), time.Second)
	if len(r.Verdicts) != 1 || r.Verdicts[0].Scan.Verdict != "clean" || r.Verdicts[0].Node != "node-b" || r.Verdicts[0].Pod != "pod-b" {
		t.Fatalf("served %+v, want node-b's clean verdict", r.Verdicts)
	}
}

// TestBudget: beyond its budget the store drops the verdicts used least
// recently, and never holds more than the budget.
func TestBudget(t *testing.T) {
	one := sizeOf(scanshare.Verdict{Key: key(1), Scan: workerresult.Scan{Verdict: "clean"}, Node: "node-b", Pod: "pod-b"})
	s := NewVerdicts(VerdictOptions{Budget: 3 * one, Lease: time.Minute, Grant: 1})
	for i := range 3 {
		s.Share(nodeB, scanshare.ShareRequest{Verdicts: []scanshare.Shared{clean(key(i))}})
	}
	s.Claim(nodeA, keys(0), time.Second) // 0 is now the most recently used
	s.Share(nodeB, scanshare.ShareRequest{Verdicts: []scanshare.Shared{clean(key(3))}})
	got := summarize(s.Claim(nodeA, keys(0, 1, 2, 3), time.Second))
	if diff := cmp.Diff([]int{0, 2, 3}, got.Verdicts); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if c, _, used, _ := s.Stats(); used > 3*one || c.Evicted != 1 {
		t.Errorf("used %d of %d, evicted %d, want 1", used, 3*one, c.Evicted)
	}
}

// TestOneScanPerKey: many scanners asking at once for the same keys get
// each key to scan exactly once, however their requests interleave.
func TestOneScanPerKey(t *testing.T) {
	s := NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Hour, Grant: 3})
	const nodes, images = 20, 50
	var (
		mu      sync.Mutex
		scanned = map[int]int{}
		wg      sync.WaitGroup
	)
	for n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := Scanner{Node: fmt.Sprint("node-", n), Pod: fmt.Sprint("pod-", n), PodUID: fmt.Sprint("uid-", n)}
			want := keys(func() []int {
				var is []int
				for i := range images {
					is = append(is, i)
				}
				return is
			}()...)
			for len(want) > 0 {
				r := s.Claim(who, want, 0)
				var share []scanshare.Shared
				for _, k := range r.Scan {
					share = append(share, clean(k))
				}
				mu.Lock()
				for _, i := range indexes(r.Scan) {
					scanned[i]++
				}
				mu.Unlock()
				s.Share(who, scanshare.ShareRequest{Verdicts: share})
				want = r.Wait
			}
		}()
	}
	wg.Wait()
	for i := range images {
		if scanned[i] != 1 {
			t.Errorf("image %d scanned %d times, want once", i, scanned[i])
		}
	}
}
