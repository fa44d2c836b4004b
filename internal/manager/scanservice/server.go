package scanservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"

	"github.com/eraser-oss/eraser/internal/manager/scandb"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Authenticator proves who presents a token: a scanner pod of the run
// whose job UID it names, or an error.
type Authenticator interface {
	Scanner(ctx context.Context, token, jobUID string) (Scanner, error)
}

// ErrNotScanner is the error of a token that proves nothing about a run's
// scanners: answered 403, the rest 401 or 503.
var ErrNotScanner = errors.New("not a scanner of this run")

// Archives opens the DB archives the manager fetched, by digest; an error
// wrapping scandb.ErrFetching says the archive is on its way.
type Archives interface {
	Open(digest string) (*os.File, error)
}

// Server answers a run's scanners.
type Server struct {
	Verdicts *Verdicts
	Auth     Authenticator
	// DBs serves the run's DB archive; nil, the scanners fetch their own.
	DBs Archives
	// Served is told of each DB archive served, with its size.
	Served func(bytes int64)
	// RetryAfter tells a scanner waiting for another's verdict when to ask
	// again.
	RetryAfter time.Duration
	// PerSource bounds the requests from one address, before their token
	// is looked at; PerPod those of one scanner pod, once authenticated.
	// Past either, a request is answered 429 with Retry-After. The zero
	// Limit bounds nothing.
	PerSource, PerPod Limit
	// Refused, when set, is told of each request refused before it is
	// served, by reason: "no-token", "not-scanner", "rate-limited",
	// "busy" (no TokenReview allowed now) or "unavailable".
	Refused func(reason string)
	Log     logr.Logger

	// held, when set, is told each time a claim starts to wait: a test
	// acts on the claim then, and not after a guess at how long it takes
	// to arrive.
	held func()

	sources, pods *limitTable
	// logged bounds the refusals logged, one by one: a flood of forged
	// requests must not become a flood of log lines.
	logged   *rate.Limiter
	unlogged atomic.Int64
}

// Handler serves the claim and share paths.
func (s *Server) Handler() http.Handler {
	s.sources, s.pods = newLimitTable(s.PerSource), newLimitTable(s.PerPod)
	s.logged = rate.NewLimiter(1, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+scanshare.ClaimPath+"{job}", s.claim)
	mux.HandleFunc("POST "+scanshare.SharePath+"{job}", s.share)
	mux.HandleFunc("GET "+scanshare.DBPath+"{job}/{digest}", s.db)
	return mux
}

// db serves a DB archive to a scanner of the run, which checks it against
// the digest its pod spec names: the archive is public data, but only a
// run's scanners may make the manager send tens of megabytes.
func (s *Server) db(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authenticate(w, r); !ok {
		return
	}
	if s.DBs == nil {
		http.Error(w, "this manager does not serve the vulnerability DB", http.StatusNotFound)
		return
	}
	f, err := s.DBs.Open(r.PathValue("digest"))
	switch {
	case errors.Is(err, scandb.ErrFetching):
		// A new leader fetching the DB of a run its predecessor started.
		w.Header().Set("Retry-After", strconv.Itoa(max(int(s.RetryAfter.Seconds()), 1)))
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case err != nil:
		http.Error(w, "no such DB archive: "+err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), f)
	if s.Served != nil {
		s.Served(fi.Size())
	}
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	who, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	var req scanshare.ClaimRequest
	if !decode(w, r, &req) {
		return
	}
	if tooMany(w, len(req.Keys), "keys") {
		return
	}
	for _, k := range req.Keys {
		if err := k.Validate(); err != nil {
			http.Error(w, "key "+k.String()+": "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	reply(w, s.claimWaiting(r.Context(), who, req))
}

// claimWaiting answers a claim at once when it has a verdict or a key to
// scan, or asks for no wait; else it holds the answer until a verdict is
// stored or a claim comes free (then claims again), up to the request's
// Wait. A scanner waiting for another node's verdict thus has it as soon
// as it is shared, with one request instead of one every RetryAfter.
func (s *Server) claimWaiting(ctx context.Context, who Scanner, req scanshare.ClaimRequest) scanshare.ClaimResponse {
	wait := time.Duration(min(max(req.Wait, 0), scanshare.MaxClaimWait)) * time.Second
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := s.Verdicts.Changed()
		resp := s.Verdicts.Claim(who, req.Keys, s.RetryAfter)
		if wait == 0 || len(resp.Verdicts)+len(resp.Scan) > 0 || len(resp.Wait) == 0 {
			return resp
		}
		if s.held != nil {
			s.held()
		}
		select {
		case <-changed:
		case <-deadline.C:
			return resp
		case <-ctx.Done():
			return resp
		}
	}
}

func (s *Server) share(w http.ResponseWriter, r *http.Request) {
	who, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	var req scanshare.ShareRequest
	if !decode(w, r, &req) {
		return
	}
	if tooMany(w, len(req.Verdicts)+len(req.Released), "verdicts and released keys") {
		return
	}
	out := s.Verdicts.Share(who, req)
	for _, ref := range out.Refused {
		s.Log.Info("refused a scanner's verdict", "node", who.Node, "pod", who.Pod, "image", ref.Key.Digest, "reason", ref.Reason)
	}
	reply(w, out)
}

// authenticate answers 401, 403, 429 or 503 itself when the request does
// not come from a scanner of the run its path names, or comes too often.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (Scanner, bool) {
	now := time.Now()
	source := r.RemoteAddr
	if host, _, err := net.SplitHostPort(source); err == nil {
		source = host
	}
	if ok, wait := s.sources.allow(source, now); !ok {
		s.refuse(w, r, "rate-limited", http.StatusTooManyRequests, wait, "too many requests from "+source)
		return Scanner{}, false
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		s.refuse(w, r, "no-token", http.StatusUnauthorized, 0, "a scanner's ServiceAccount token is required")
		return Scanner{}, false
	}
	job := r.PathValue("job")
	who, err := s.Auth.Scanner(r.Context(), token, job)
	var busy *BusyError
	switch {
	case err == nil:
		if ok, wait := s.pods.allow(who.PodUID, now); !ok {
			s.refuse(w, r, "rate-limited", http.StatusTooManyRequests, wait, "too many requests from pod "+who.Pod)
			return Scanner{}, false
		}
		who.Job = job
		return who, true
	case errors.Is(err, ErrNotScanner):
		s.refuse(w, r, "not-scanner", http.StatusForbidden, 0, err.Error())
	case errors.As(err, &busy):
		s.refuse(w, r, "busy", http.StatusServiceUnavailable, busy.RetryAfter, err.Error())
	default:
		// The API server could not say: the scanner scans itself.
		s.Log.Error(err, "could not authenticate a scanner", "job", job)
		s.refuse(w, r, "unavailable", http.StatusServiceUnavailable, 0, "authentication is unavailable")
	}
	return Scanner{}, false
}

// refuse answers a request refused before it is served, with Retry-After
// when retry is set, and logs it unless refusals come faster than a log
// can be read (the next line logged counts those left out).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, code int, retry time.Duration, msg string) {
	if s.Refused != nil {
		s.Refused(reason)
	}
	if reason != "unavailable" { // logged as an error already
		if s.logged == nil || s.logged.Allow() {
			s.Log.Info("refused a request", "job", r.PathValue("job"), "remote", r.RemoteAddr, "status", code, "reason", msg,
				"refusedUnlogged", s.unlogged.Swap(0))
		} else {
			s.unlogged.Add(1)
		}
	}
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(int(math.Ceil(retry.Seconds())), 1)))
	}
	http.Error(w, msg, code)
}

// tooMany answers 413 to a request of more than MaxKeys items.
func tooMany(w http.ResponseWriter, n int, what string) bool {
	if n <= scanshare.MaxKeys {
		return false
	}
	http.Error(w, fmt.Sprintf("%d %s: at most %d in one request", n, what, scanshare.MaxKeys), http.StatusRequestEntityTooLarge)
	return true
}

func decode(w http.ResponseWriter, r *http.Request, into any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, scanshare.MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		code := http.StatusBadRequest
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, "request body: "+err.Error(), code)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
