package scanservice

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

const runUID = "6a3c1f0e-0000-4000-8000-000000000001"

// tokens authenticates "<pod>@<job UID>" as that pod on node "node-<pod>",
// for that job only.
type tokens struct{}

func (tokens) Scanner(_ context.Context, token, jobUID string) (Scanner, error) {
	pod, job, ok := strings.Cut(token, "@")
	if !ok || job != jobUID {
		return Scanner{}, fmt.Errorf("%w: token of another run", ErrNotScanner)
	}
	return Scanner{Node: "node-" + pod, Pod: pod, PodUID: "uid-" + pod}, nil
}

func serve(t *testing.T, set ...func(*Server)) (*Verdicts, string) {
	t.Helper()
	v := NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2})
	s := &Server{Verdicts: v, Auth: tokens{}, RetryAfter: time.Second, Log: logr.Discard()}
	for _, f := range set {
		f(s)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return v, srv.URL
}

// TestRequestBounds: bodies past the bounds are refused before they are
// held.
func TestRequestBounds(t *testing.T) {
	_, base := serve(t)
	for name, tc := range map[string]struct {
		body string
		want int
	}{
		"unknown field":       {body: `{"keys":[],"extra":1}`, want: http.StatusBadRequest},
		"not json":            {body: `keys`, want: http.StatusBadRequest},
		"an invalid key":      {body: `{"keys":[{"digest":"alpine:3.19"}]}`, want: http.StatusBadRequest},
		"a body past the cap": {body: `{"keys":[` + strings.Repeat(`{"digest":"x"},`, scanshare.MaxBody/14) + `]}`, want: http.StatusRequestEntityTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, base+scanshare.ClaimPath+runUID, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer pod1@"+runUID)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

// TestClaimHeldUntilSomethingComes: a claim that asks to wait and would
// only be told to wait is held until the verdict it waits for is shared, or
// a claim it waits on is released (then it is handed the key), or its wait
// runs out; a claim that does not ask to wait is answered at once.
func TestClaimHeldUntilSomethingComes(t *testing.T) {
	key := func(n int) scanshare.Key {
		return scanshare.Key{Digest: fmt.Sprintf("sha256:%064x", n), Platform: "linux/amd64", DB: "sha256:" + strings.Repeat("d", 64), Policy: strings.Repeat("0", 64)}
	}
	verdict := scanshare.Shared{Scan: workerresult.Scan{Verdict: "clean"}}
	type answer struct{ Verdicts, Scan, Wait int }
	cases := map[string]struct {
		wait int
		// then is what the holder does while the other waits.
		then func(holder *wireClient, k scanshare.Key) error
		want answer
	}{
		"the verdict comes": {wait: scanshare.MaxClaimWait, then: func(h *wireClient, k scanshare.Key) error {
			v := verdict
			v.Key = k
			_, err := h.Share(context.Background(), scanshare.ShareRequest{Verdicts: []scanshare.Shared{v}})
			return err
		}, want: answer{Verdicts: 1}},
		"the claim is released": {wait: scanshare.MaxClaimWait, then: func(h *wireClient, k scanshare.Key) error {
			_, err := h.Share(context.Background(), scanshare.ShareRequest{Released: []scanshare.Key{k}})
			return err
		}, want: answer{Scan: 1}},
		"nothing comes within the wait": {wait: 1, want: answer{Wait: 1}},
		"no wait asked":                 {wait: 0, want: answer{Wait: 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			held := make(chan struct{}, 1)
			_, base := serve(t, func(s *Server) {
				s.held = func() {
					select {
					case held <- struct{}{}:
					default:
					}
				}
			})
			holder, waiter := &wireClient{base: base, run: runUID, token: "pod1@" + runUID}, &wireClient{base: base, run: runUID, token: "pod2@" + runUID}
			k := key(1)
			if resp, err := holder.Claim(context.Background(), scanshare.ClaimRequest{Keys: []scanshare.Key{k}}); err != nil || len(resp.Scan) != 1 {
				t.Fatalf("the holder's claim: %+v %v", resp, err)
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := waiter.Claim(context.Background(), scanshare.ClaimRequest{Keys: []scanshare.Key{k}, Wait: tc.wait})
				if err != nil {
					t.Error(err)
				}
				got <- answer{len(resp.Verdicts), len(resp.Scan), len(resp.Wait)}
			}()
			if tc.then != nil {
				// After the waiter's claim is held: a claim answered at
				// once would say wait.
				select {
				case <-held:
				case <-time.After(time.Minute):
					t.Fatal("the waiter's claim was not held within a minute")
				}
				if err := tc.then(holder, k); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, <-got); diff != "" {
				t.Errorf("the waiter's answer (-want +got):\n%s", diff)
			}
		})
	}
}

// busyAuth is an Authenticator whose TokenReviews are spent.
type busyAuth struct{}

func (busyAuth) Scanner(context.Context, string, string) (Scanner, error) {
	return Scanner{}, &BusyError{RetryAfter: 1500 * time.Millisecond}
}

// TestRequestRateBounds: past the bound of its source address, or of its
// pod once authenticated, or when no TokenReview may be sent now, a
// request is answered at once with when to ask again, and the refusal is
// counted.
func TestRequestRateBounds(t *testing.T) {
	for name, tc := range map[string]struct {
		perSource, perPod Limit
		auth              Authenticator
		tokens            []string
		want              []int
		reason            string
	}{
		"one source address": {perSource: Limit{Rate: 0.01, Burst: 2}, tokens: []string{"pod1", "pod2", "pod3"},
			want: []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests}, reason: "rate-limited"},
		"one pod": {perPod: Limit{Rate: 0.01, Burst: 2}, tokens: []string{"pod1", "pod1", "pod2", "pod1"},
			want: []int{http.StatusOK, http.StatusOK, http.StatusOK, http.StatusTooManyRequests}, reason: "rate-limited"},
		"no review allowed now": {auth: busyAuth{}, tokens: []string{"pod1"},
			want: []int{http.StatusServiceUnavailable}, reason: "busy"},
	} {
		t.Run(name, func(t *testing.T) {
			refused := map[string]int{}
			var mu sync.Mutex
			srv := &Server{Verdicts: NewVerdicts(VerdictOptions{Budget: 1 << 20, Lease: time.Minute, Grant: 2}), Auth: tc.auth,
				PerSource: tc.perSource, PerPod: tc.perPod, RetryAfter: time.Second, Log: logr.Discard(),
				Refused: func(reason string) { mu.Lock(); refused[reason]++; mu.Unlock() }}
			if srv.Auth == nil {
				srv.Auth = tokens{}
			}
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			var got []int
			var retry string
			for _, pod := range tc.tokens {
				req, _ := http.NewRequest(http.MethodPost, hs.URL+scanshare.ClaimPath+runUID, strings.NewReader(`{"keys":[]}`))
				req.Header.Set("Authorization", "Bearer "+pod+"@"+runUID)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got = append(got, resp.StatusCode)
				if resp.StatusCode != http.StatusOK {
					retry = resp.Header.Get("Retry-After")
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if retry == "" || retry == "0" {
				t.Errorf("Retry-After %q, want a number of seconds", retry)
			}
			if refused[tc.reason] != 1 {
				t.Errorf("refusals counted %v, want one %s", refused, tc.reason)
			}
		})
	}
}
