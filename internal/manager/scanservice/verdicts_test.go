package scanservice

import (
	"encoding/json"
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
	tooMany := clean(key(1))
	for i := range workerresult.MaxFindings + 1 {
		tooMany.Scan.Findings = append(tooMany.Scan.Findings, workerresult.Finding{ID: fmt.Sprint("CVE-", i)})
	}
	withOrigin := clean(key(1))
	withOrigin.Scan.From = &workerresult.Origin{Node: "node-c", Pod: "pod-c"}
	for name, tc := range map[string]struct {
		// node B claims claimedByB first, and releases released; then
		// node A claims claimedByA.
		claimedByB, released, claimedByA []int
		share                            []scanshare.Shared
		wantStored                       int
		wantRefused                      []string
	}{
		"a verdict on a key handed to the scanner is kept": {
			claimedByA: []int{1},
			share:      []scanshare.Shared{clean(key(1))}, wantStored: 1,
		},
		"a verdict on a key nobody handed out is refused": {
			share:       []scanshare.Shared{clean(key(1))},
			wantRefused: []string{"this scanner was not handed this key to scan"},
		},
		"a key another scanner holds is refused": {
			claimedByB:  []int{1},
			share:       []scanshare.Shared{clean(key(1))},
			wantRefused: []string{"this scanner was not handed this key to scan"},
		},
		"a released key is handed to the next who asks": {
			claimedByB: []int{1}, released: []int{1}, claimedByA: []int{1},
			share: []scanshare.Shared{clean(key(1))}, wantStored: 1,
		},
		"a failed scan is not shared": {
			claimedByA:  []int{1},
			share:       []scanshare.Shared{{Key: key(1), Scan: workerresult.Scan{Verdict: "failed"}}},
			wantRefused: []string{"verdict failed is not shared"},
		},
		"an invalid key is refused": {
			share:       []scanshare.Shared{clean(invalid)},
			wantRefused: []string{`digest: "sha256:nothex" is not a sha256 digest`},
		},
		"more findings than a scanner keeps are refused": {
			claimedByA:  []int{1},
			share:       []scanshare.Shared{tooMany},
			wantRefused: []string{"6 findings: a verdict carries at most 5"},
		},
		"an origin the scanner names is refused": {
			claimedByA:  []int{1},
			share:       []scanshare.Shared{withOrigin},
			wantRefused: []string{"a shared verdict names no origin: the service records who sent it"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(&clock{t: time.Unix(1e9, 0)})
			if len(tc.claimedByB) > 0 {
				s.Claim(nodeB, keys(tc.claimedByB...), time.Second)
				s.Share(nodeB, scanshare.ShareRequest{Released: keys(tc.released...)})
			}
			if len(tc.claimedByA) > 0 {
				s.Claim(nodeA, keys(tc.claimedByA...), time.Second)
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

// scanned is what who shares after claiming k and scanning it.
func scanned(s *Verdicts, who Scanner, v scanshare.Shared) scanshare.ShareResponse {
	s.Claim(who, []scanshare.Key{v.Key}, time.Second)
	return s.Share(who, scanshare.ShareRequest{Verdicts: []scanshare.Shared{v}})
}

func vulnerable(k scanshare.Key, ids ...string) scanshare.Shared {
	v := scanshare.Shared{Key: k, Scan: workerresult.Scan{Verdict: "vulnerable"}}
	for _, id := range ids {
		v.Scan.Findings = append(v.Scan.Findings, workerresult.Finding{ID: id, Severity: "CRITICAL"})
	}
	return v
}

// TestFirstVerdictStays: a second scanner cannot replace a verdict, and
// the one served says who made it.
func TestFirstVerdictStays(t *testing.T) {
	s := newStore(&clock{t: time.Unix(1e9, 0)})
	scanned(s, nodeB, clean(key(1)))
	if got := s.Share(nodeA, scanshare.ShareRequest{Verdicts: []scanshare.Shared{vulnerable(key(1), "CVE-1")}}); got.Stored != 0 {
		t.Fatalf("a second verdict was stored: %+v", got)
	}
	r := s.Claim(nodeA, keys(1), time.Second)
	if len(r.Verdicts) != 1 || r.Verdicts[0].Scan.Verdict != "clean" || r.Verdicts[0].Node != "node-b" || r.Verdicts[0].Pod != "pod-b" {
		t.Fatalf("served %+v, want node-b's clean verdict", r.Verdicts)
	}
}

// TestRemovalNeedsSecondNode: a verdict that removes reaches another node
// only once a second node's own scan agreed. A second that keeps the image
// is taken at its word; one that removes for other reasons has a third
// node's scan decide; when all three differ, nobody is served.
func TestRemovalNeedsSecondNode(t *testing.T) {
	nodeC, nodeD := nodeC(), Scanner{Node: "node-d", Pod: "pod-d", PodUID: "uid-d"}
	sameNodeOtherRun := Scanner{Node: "node-a", Pod: "pod-a2", PodUID: "uid-a2", Job: "run-2"}
	for name, tc := range map[string]struct {
		// second is node B's scan; third, if any, node C's, handed the
		// key to decide.
		second, third scanshare.Shared
		// wantD is what node D is answered in the end, by whom.
		wantD                answer
		wantFrom, wantConfBy string
		wantRefused          []string
		want                 Counters
	}{
		"a second node agrees: confirmed, served": {
			second: vulnerable(key(1), "CVE-2", "CVE-1"),
			wantD:  answer{Verdicts: []int{1}}, wantFrom: "node-a", wantConfBy: "node-b",
			want: Counters{Served: 2, Stored: 1, Confirmed: 1},
		},
		"a second node finds it clean: its verdict keeps the image everywhere": {
			second: clean(key(1)),
			wantD:  answer{Verdicts: []int{1}}, wantFrom: "node-b",
			want: Counters{Served: 2, Stored: 1, Contradicted: 1},
		},
		"a second node finds other vulnerabilities, a third agrees with it: node A is overruled": {
			second: vulnerable(key(1), "CVE-9"), third: vulnerable(key(1), "CVE-9"),
			wantD: answer{Verdicts: []int{1}}, wantFrom: "node-b", wantConfBy: "node-c",
			want: Counters{Served: 2, Stored: 1, Contradicted: 1, Overruled: 1},
		},
		"a second node finds other vulnerabilities, a third agrees with node A: confirmed": {
			second: vulnerable(key(1), "CVE-9"), third: vulnerable(key(1), "CVE-1"),
			wantD: answer{Verdicts: []int{1}}, wantFrom: "node-a", wantConfBy: "node-c",
			want: Counters{Served: 2, Stored: 1, Contradicted: 1, Confirmed: 1},
		},
		"a second node finds other vulnerabilities, a third finds it clean: kept": {
			second: vulnerable(key(1), "CVE-9"), third: clean(key(1)),
			wantD: answer{Verdicts: []int{1}}, wantFrom: "node-c",
			want: Counters{Served: 2, Stored: 1, Contradicted: 2},
		},
		"three verdicts differ: disputed, nobody is served": {
			second: vulnerable(key(1), "CVE-9"), third: vulnerable(key(1), "CVE-7"),
			wantD:       answer{},
			wantRefused: []string{"three nodes' verdicts differ (node node-a's vulnerable, this one's vulnerable): every node scans this image itself"},
			want:        Counters{Served: 1, Stored: 1, Refused: 1, Contradicted: 1, Disputed: 1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(&clock{t: time.Unix(1e9, 0)})
			scanned(s, nodeA, vulnerable(key(1), "CVE-1"))
			// Its own node takes it on its word.
			if got := summarize(s.Claim(sameNodeOtherRun, keys(1), time.Second)); !cmp.Equal(got, answer{Verdicts: []int{1}}) {
				t.Fatalf("same node answered %+v", got)
			}
			if got := summarize(s.Claim(nodeB, keys(1), time.Second)); !cmp.Equal(got, answer{Scan: []int{1}}) {
				t.Fatalf("node B answered %+v, want the key to confirm", got)
			}
			if got := summarize(s.Claim(nodeD, keys(1), time.Second)); !cmp.Equal(got, answer{Wait: []int{1}}) {
				t.Fatalf("node D answered %+v while B confirms, want wait", got)
			}
			var refused []string
			for _, r := range s.Share(nodeB, scanshare.ShareRequest{Verdicts: []scanshare.Shared{tc.second}}).Refused {
				refused = append(refused, r.Reason)
			}
			if tc.third.Key != (scanshare.Key{}) {
				for _, who := range []Scanner{nodeA, nodeB} {
					if got := summarize(s.Claim(who, keys(1), time.Second)); !cmp.Equal(got, answer{}) {
						t.Fatalf("%s, whose verdict is in question, answered %+v: want to scan itself", who.Node, got)
					}
				}
				if got := summarize(s.Claim(nodeC, keys(1), time.Second)); !cmp.Equal(got, answer{Scan: []int{1}}) {
					t.Fatalf("node C answered %+v, want the key to decide", got)
				}
				for _, r := range s.Share(nodeC, scanshare.ShareRequest{Verdicts: []scanshare.Shared{tc.third}}).Refused {
					refused = append(refused, r.Reason)
				}
			}
			if diff := cmp.Diff(tc.wantRefused, refused); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
			r := s.Claim(nodeD, keys(1), time.Second)
			if diff := cmp.Diff(tc.wantD, summarize(r)); diff != "" {
				t.Errorf("node D (-want +got):\n%s", diff)
			}
			if len(r.Verdicts) == 1 && (r.Verdicts[0].Node != tc.wantFrom || r.Verdicts[0].ConfirmedBy != tc.wantConfBy) {
				t.Errorf("served %+v, want %s's verdict confirmed by %s", r.Verdicts[0], tc.wantFrom, tc.wantConfBy)
			}
			if diff := cmp.Diff(tc.want, s.Stats().Counters); diff != "" {
				t.Errorf("counters (-want +got):\n%s", diff)
			}
			if st := s.Stats(); st.Bytes != s.byKey[key(1)].size {
				t.Errorf("store counts %d bytes, its one record %d", st.Bytes, s.byKey[key(1)].size)
			}
		})
	}
}

// TestClaimsBounded: a scanner holds at most MaxClaims keys however often
// it asks; asking again never renews a claim past its lease, and a key
// whose claim it let lapse is never its again.
func TestClaimsBounded(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	s := NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2, MaxClaims: 3, Now: c.now})
	held := 0
	for i := range 100 {
		held += len(s.Claim(nodeA, keys(2*i, 2*i+1), time.Second).Scan)
	}
	if held != 3 || s.Stats().Claims != 3 {
		t.Fatalf("node A was handed %d keys, the store holds %d claims: want 3", held, s.Stats().Claims)
	}
	c.t = c.t.Add(50 * time.Second)
	if got := summarize(s.Claim(nodeA, keys(0), time.Second)); !cmp.Equal(got, answer{Scan: []int{0}}) {
		t.Fatalf("its own claim asked again: %+v", got)
	}
	c.t = c.t.Add(11 * time.Second) // past the first lease, not a renewed one
	s.Expire()
	if got := summarize(s.Claim(nodeA, keys(0, 1), time.Second)); !cmp.Equal(got, answer{Wait: []int{0, 1}}) {
		t.Fatalf("node A answered %+v for the keys it let lapse, want wait", got)
	}
	if got := summarize(s.Claim(nodeB, keys(0), time.Second)); !cmp.Equal(got, answer{Scan: []int{0}}) {
		t.Fatalf("node B answered %+v, want the lapsed claim", got)
	}
}

// TestFloodKeepsRealVerdicts: a scanner sharing junk as fast as it can
// fills only its own share of the store; another node's verdicts stay.
func TestFloodKeepsRealVerdicts(t *testing.T) {
	one := sizeOf(scanshare.Verdict{Key: key(1), Scan: workerresult.Scan{Verdict: "clean"}, Node: "node-a", Pod: "pod-a"})
	s := NewVerdicts(VerdictOptions{Budget: 40 * one, PerScanner: 10 * one, Lease: time.Minute, Grant: 4})
	scanned(s, nodeB, clean(key(1)))
	stored, refused := 0, 0
	for i := 1000; i < 1500; i++ {
		r := scanned(s, nodeA, clean(key(i)))
		stored += r.Stored
		refused += len(r.Refused)
	}
	if stored > 10 || refused == 0 {
		t.Errorf("the flood stored %d verdicts (refused %d), want at most its share of 10", stored, refused)
	}
	if got := summarize(s.Claim(nodeC(), keys(1), time.Second)); !cmp.Equal(got, answer{Verdicts: []int{1}}) {
		t.Errorf("node B's verdict after the flood: %+v", got)
	}
	if st := s.Stats(); st.Bytes > 40*one || st.Evicted != 0 {
		t.Errorf("store %+v: over budget, or it evicted a live run's verdict", st)
	}
}

func nodeC() Scanner { return Scanner{Node: "node-c", Pod: "pod-c", PodUID: "uid-c"} }

// TestEndRuns: when a run ends its unconfirmed verdicts go and its
// confirmed ones serve the next run, until a run of another DB ends.
func TestEndRuns(t *testing.T) {
	live := map[string]bool{"run-1": true, "run-2": true, "run-3": true}
	s := NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2, Live: func(job string) bool { return live[job] }})
	a, b := nodeA, nodeB
	a.Job, b.Job = "run-1", "run-1"
	scanned(s, a, clean(key(1)))
	scanned(s, a, vulnerable(key(2), "CVE-1"))
	scanned(s, b, vulnerable(key(2), "CVE-1")) // confirms
	scanned(s, a, vulnerable(key(3), "CVE-1")) // nobody confirms
	s.Claim(b, keys(4), time.Second)           // a claim left behind

	live["run-1"] = false // a new run's first request ends it
	next := Scanner{Node: "node-c", Pod: "pod-c2", PodUID: "uid-c2", Job: "run-2"}
	if got := summarize(s.Claim(next, keys(1, 2, 3, 4), time.Second)); !cmp.Equal(got, answer{Verdicts: []int{2}, Scan: []int{1, 3}, Wait: []int{4}}) {
		t.Errorf("the next run was answered %+v, want only the confirmed verdict served and run 1's claim gone", got)
	}
	if st := s.Stats(); st.Forgotten != 2 || st.Verdicts != 1 {
		t.Errorf("after the run: %+v, want 2 forgotten and 1 kept", st)
	}

	newDB := key(2)
	newDB.DB = "sha256:" + strings.Repeat("e", 64)
	third := Scanner{Node: "node-c", Pod: "pod-c3", PodUID: "uid-c3", Job: "run-3"}
	s.Claim(third, []scanshare.Key{newDB}, time.Second)
	live["run-2"] = false
	s.EndRuns() // run 2 asked about the old DB
	if st := s.Stats(); st.Verdicts != 1 {
		t.Errorf("a verdict of the DB an ending run used was dropped: %+v", st)
	}
	live["run-3"] = false
	s.EndRuns()
	if st := s.Stats(); st.Verdicts != 0 {
		t.Errorf("a verdict of a DB no run uses any more was kept: %+v", st)
	}
}

// TestBudget: beyond its budget the store drops the settled verdicts used
// least recently, never a live run's: those beyond it are refused.
func TestBudget(t *testing.T) {
	one := sizeOf(scanshare.Verdict{Key: key(1), Scan: workerresult.Scan{Verdict: "clean"}, Node: "node-b", Pod: "pod-b", ConfirmedBy: "node-a"})
	ended := false
	s := NewVerdicts(VerdictOptions{Budget: 3 * one, PerScanner: 10 * one, Lease: time.Minute, Grant: 1, Live: func(job string) bool { return !ended || job != "run-1" }})
	b := nodeB
	b.Job = "run-1"
	for i := range 3 {
		scanned(s, b, clean(key(i)))
	}
	if r := scanned(s, b, clean(key(3))); len(r.Refused) != 1 || r.Refused[0].Reason != "the store is full" {
		t.Fatalf("beyond the budget in a live run: %+v, want refused", r)
	}
	// Settle them as confirmed: only those may be evicted.
	for i := range 3 {
		s.byKey[key(i)].confirmedBy = "node-a"
	}
	ended = true
	next := nodeA
	next.Job = "run-2"
	s.Claim(next, keys(0), time.Second) // 0 is now the most recently used
	scanned(s, next, clean(key(3)))
	got := summarize(s.Claim(next, keys(0, 1, 2, 3), time.Second))
	if diff := cmp.Diff([]int{0, 2, 3}, got.Verdicts); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Bytes > 3*one || st.Evicted != 1 {
		t.Errorf("used %d of %d, evicted %d, want 1", st.Bytes, 3*one, st.Evicted)
	}
}

// TestAnswerBounded: however large the verdicts asked, one answer fits in
// what a scanner reads; the rest come in the next.
func TestAnswerBounded(t *testing.T) {
	s := NewVerdicts(VerdictOptions{Budget: 64 << 20, PerScanner: 64 << 20, Lease: time.Minute, Grant: scanshare.MaxKeys, MaxClaims: scanshare.MaxKeys})
	big := strings.Repeat("x", 250)
	var all []scanshare.Key
	for i := range scanshare.MaxKeys {
		v := clean(key(i))
		for j := range workerresult.MaxFindings {
			v.Scan.Findings = append(v.Scan.Findings, workerresult.Finding{ID: fmt.Sprint(j, big), Severity: big, Package: big, FixedVersion: big})
		}
		scanned(s, nodeA, v)
		all = append(all, v.Key)
	}
	r := s.Claim(nodeB, all, time.Second)
	body, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > scanshare.MaxBody || len(r.Verdicts) == 0 || len(r.Verdicts)+len(r.Wait) != len(all) {
		t.Errorf("answer of %d bytes with %d verdicts and %d to ask again, want at most %d bytes and every key", len(body), len(r.Verdicts), len(r.Wait), scanshare.MaxBody)
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
