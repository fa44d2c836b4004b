//go:build bench && linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// keySet is the keys the fleet's scanners asked about.
type keySet struct {
	mu   sync.Mutex
	keys map[scanshare.Key]bool
}

func (s *keySet) add(ks []scanshare.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[scanshare.Key]bool{}
	}
	for _, k := range ks {
		s.keys[k] = true
	}
}

func (s *keySet) list() []scanshare.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]scanshare.Key, 0, len(s.keys))
	for k := range s.keys {
		out = append(out, k)
	}
	return out
}

// recordKeys notes the keys of each claim before the service answers it:
// what a compromised scanner could compute for itself (the DB digest is in
// its environment, the images' config digests are public).
func recordKeys(next http.Handler, into *keySet) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, scanshare.ClaimPath) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, scanshare.MaxBody))
			var req scanshare.ClaimRequest
			if json.Unmarshal(body, &req) == nil {
				into.add(req.Keys)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// liar is one compromised scanner of the fleet. Before the collectors
// start it claims every key the honest nodes will ask about and shares a
// forged "vulnerable" verdict for each it is handed; then, until the fleet
// is done, it floods the service from one connection with claims of junk
// keys, junk verdicts on them, and verdicts for keys it was never handed,
// ignoring every refusal and 429.
type liar struct {
	requests atomic.Int64
}

func (l *liar) run(t *testing.T, base string, known []scanshare.Key, collect, stop <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	post := func(path string, body any) []byte {
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path+"bench", bytes.NewReader(data))
		if err != nil {
			t.Error(err)
			return nil
		}
		req.Header.Set("Authorization", "Bearer node-liar")
		l.requests.Add(1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, scanshare.MaxBody))
		return out
	}
	forged := func(k scanshare.Key) scanshare.Shared {
		return scanshare.Shared{Key: k, Scan: workerresult.Scan{Verdict: "vulnerable",
			Findings: []workerresult.Finding{{ID: "CVE-FORGED", Severity: "CRITICAL"}}}}
	}
	for i := 0; i < len(known); i += 4 {
		var resp scanshare.ClaimResponse
		_ = json.Unmarshal(post(scanshare.ClaimPath, scanshare.ClaimRequest{Keys: known[i:min(i+4, len(known))]}), &resp)
		var share scanshare.ShareRequest
		for _, k := range resp.Scan {
			share.Verdicts = append(share.Verdicts, forged(k))
		}
		post(scanshare.SharePath, share)
	}
	<-collect
	if len(known) == 0 {
		return
	}
	junk := func() scanshare.Key {
		k := known[0]
		k.Digest = fmt.Sprintf("sha256:%016x%016x%016x%016x", rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64())
		return k
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		keys := []scanshare.Key{junk(), junk(), junk(), junk()}
		var resp scanshare.ClaimResponse
		_ = json.Unmarshal(post(scanshare.ClaimPath, scanshare.ClaimRequest{Keys: keys}), &resp)
		share := scanshare.ShareRequest{Verdicts: []scanshare.Shared{forged(known[rand.IntN(len(known))])}}
		for _, k := range resp.Scan {
			share.Verdicts = append(share.Verdicts, scanshare.Shared{Key: k, Scan: workerresult.Scan{Verdict: "clean"}})
		}
		post(scanshare.SharePath, share)
	}
}
