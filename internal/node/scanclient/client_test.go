package scanclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

const archive = "the run's DB archive"

func archiveDigest() string {
	sum := sha256.Sum256([]byte(archive))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// serve answers DB requests on ln: the first fail answers with status
// fail (0: the archive), then the archive (or body, when set).
func serve(t *testing.T, ln net.Listener, fail, failStatus int, body string, asked *atomic.Int32) {
	t.Helper()
	srv := &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if int(asked.Add(1)) <= fail {
			http.Error(w, "not now", failStatus)
			return
		}
		_, _ = io.WriteString(w, body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func newClient(t *testing.T, addr string) *Client {
	t.Helper()
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := New("http://"+addr, "job-uid", token)
	c.FirstWait = 10 * time.Millisecond
	return c
}

// TestFetchDB: the DB is asked for again while the service does not answer
// (a manager restarting in its pod) or answers 5xx, never after a refusal
// or a wrong archive; what was written of a failed attempt is dropped.
func TestFetchDB(t *testing.T) {
	type result struct {
		Asked   int
		Content string
		Err     bool
	}
	cases := map[string]struct {
		fail, status int
		body         string
		// down: the service starts listening only after a while; moved:
		// it never answers at its first address, and the service file
		// names another one after a while (a new leader in a new pod);
		// silent: what listens at the first address never answers (a
		// frozen leader).
		down, moved, silent bool
		// deadline is the caller's (default a minute).
		deadline time.Duration
		want     result
	}{
		"answered at once":             {body: archive, want: result{Asked: 1, Content: archive}},
		"503 twice, then the archive":  {fail: 2, status: http.StatusServiceUnavailable, body: archive, want: result{Asked: 3, Content: archive}},
		"not listening, then up":       {down: true, body: archive, want: result{Asked: 1, Content: archive}},
		"moved to a new address":       {moved: true, body: archive, want: result{Asked: 1, Content: archive}},
		"moved, the old one silent":    {moved: true, silent: true, body: archive, want: result{Asked: 1, Content: archive}},
		"refused (403): not again":     {fail: 1, status: http.StatusForbidden, body: archive, want: result{Asked: 1, Err: true}},
		"no such archive (404)":        {fail: 1, status: http.StatusNotFound, body: archive, want: result{Asked: 1, Err: true}},
		"a wrong archive: not again":   {body: "another archive", want: result{Asked: 1, Err: true}},
		"always 500: until the caller": {fail: 1 << 20, status: http.StatusInternalServerError, deadline: 200 * time.Millisecond, want: result{Err: true}},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		var asked atomic.Int32
		c := newClient(t, addr)
		if tc.moved {
			if tc.silent {
				// Accepts, reads, never answers; the client waits for
				// an answer a short while here.
				go func() {
					for {
						conn, err := ln.Accept()
						if err != nil {
							return
						}
						go func() { _, _ = io.Copy(io.Discard, conn) }()
					}
				}()
				t.Cleanup(func() { ln.Close() })
				c.HTTP.Transport.(*http.Transport).ResponseHeaderTimeout = 200 * time.Millisecond
			} else {
				ln.Close()
			}
			moved, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			serve(t, moved, tc.fail, tc.status, tc.body, &asked)
			c.ServiceFile = filepath.Join(t.TempDir(), "service")
			go func() {
				time.Sleep(100 * time.Millisecond)
				_ = os.WriteFile(c.ServiceFile, []byte("http://"+moved.Addr().String()+"\n"), 0o600)
			}()
		}
		if tc.down {
			ln.Close()
			go func() {
				time.Sleep(100 * time.Millisecond)
				if ln, err := net.Listen("tcp", addr); err == nil {
					serve(t, ln, tc.fail, tc.status, tc.body, &asked)
				}
			}()
		} else if !tc.moved {
			serve(t, ln, tc.fail, tc.status, tc.body, &asked)
		}
		dst, err := os.CreateTemp(t.TempDir(), "db")
		if err != nil {
			t.Fatal(err)
		}
		deadline := tc.deadline
		if deadline == 0 {
			deadline = time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		_, ferr := c.FetchDB(ctx, archiveDigest(), dst, nil)
		cancel()
		content, err := os.ReadFile(dst.Name())
		if err != nil {
			t.Fatal(err)
		}
		dst.Close()
		r := result{Asked: int(asked.Load()), Err: ferr != nil}
		if ferr == nil {
			r.Content = string(content)
		}
		if tc.want.Asked == 0 {
			// Asked as long as the caller let it: some number of times.
			r.Asked = 0
		}
		got[name], want[name] = r, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FetchDB (-want +got):\n%s", diff)
	}
}

func TestTransient(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"503":              {err: &StatusError{Code: 503}, want: true},
		"429":              {err: &StatusError{Code: 429}, want: true},
		"401":              {err: &StatusError{Code: 401}},
		"404":              {err: &StatusError{Code: 404}},
		"connection error": {err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}, want: true},
		"cut short":        {err: io.ErrUnexpectedEOF, want: true},
		"wrong archive":    {err: ErrWrongArchive},
		"timed out":        {err: &url.Error{Op: "Get", URL: "http://manager/scan/v1/db/", Err: context.DeadlineExceeded}, want: true},
		"cancelled":        {err: &url.Error{Op: "Get", URL: "http://manager/scan/v1/db/", Err: context.Canceled}},
		"anything else":    {err: errors.New("reading the scan service token: no such file")},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = Transient(tc.err), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Transient (-want +got):\n%s", diff)
	}
}

// TestDBSizeBound: the download reads no more than the run's archive's
// size (or MaxDBArchive when the pod spec gives none), whatever the
// service sends or announces, and fails, not asked again, when it is
// longer.
func TestDBSizeBound(t *testing.T) {
	type result struct {
		Written int64
		Err     bool
		Wrong   bool
	}
	endless := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, archive)
		chunk := make([]byte, 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	for name, tc := range map[string]struct {
		size    int64
		handler http.HandlerFunc
		want    result
	}{
		"the archive, of its size": {size: int64(len(archive)), handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, archive) },
			want: result{Written: int64(len(archive))}},
		"the archive, no size given": {handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, archive) },
			want: result{Written: int64(len(archive))}},
		"the archive and more, unannounced": {size: int64(len(archive)), handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, archive)
			w.(http.Flusher).Flush() // no Content-Length
			_, _ = io.WriteString(w, "and more")
		}, want: result{Written: int64(len(archive)) + 1, Err: true, Wrong: true}},
		"an endless stream": {size: int64(len(archive)), handler: endless,
			want: result{Written: int64(len(archive)) + 1, Err: true, Wrong: true}},
		"more announced than the archive's size": {size: int64(len(archive)), handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1048576")
			_, _ = io.WriteString(w, archive)
		}, want: result{Err: true, Wrong: true}},
		"more announced than any archive": {handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(MaxDBArchive+1))
			_, _ = io.WriteString(w, archive)
		}, want: result{Err: true, Wrong: true}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			c := newClient(t, strings.TrimPrefix(srv.URL, "http://"))
			c.DBSize = tc.size
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var dst countingWriter
			_, err := c.DB(ctx, archiveDigest(), &dst)
			got := result{Written: int64(dst), Err: err != nil, Wrong: errors.Is(err, ErrWrongArchive)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// TestTooManyRequests: a service that limits how often a scanner asks
// (429) is asked again after its Retry-After, bounded, while the request's
// deadline allows; past it, the 429 is the answer, which is transient.
func TestTooManyRequests(t *testing.T) {
	type result struct {
		Asked int
		Err   bool
	}
	for name, tc := range map[string]struct {
		limited    int // answers 429 this many times, then the claim's answer
		retryAfter string
		deadline   time.Duration
		want       result
	}{
		"limited once, asked again after a second": {limited: 1, retryAfter: "1", deadline: time.Minute, want: result{Asked: 2}},
		"limited twice, no Retry-After":            {limited: 2, deadline: time.Minute, want: result{Asked: 3}},
		"Retry-After past the deadline":            {limited: 1, retryAfter: "5", deadline: 2 * time.Second, want: result{Asked: 1, Err: true}},
		"always limited: given up by the deadline": {limited: 1 << 20, retryAfter: "1", deadline: 2500 * time.Millisecond, want: result{Asked: 3, Err: true}},
	} {
		t.Run(name, func(t *testing.T) {
			var asked atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if int(asked.Add(1)) <= tc.limited {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				_ = json.NewEncoder(w).Encode(scanshare.ClaimResponse{RetryAfter: 1})
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, strings.TrimPrefix(srv.URL, "http://"))
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			start := time.Now()
			resp, err := c.Claim(ctx, scanshare.ClaimRequest{})
			took := time.Since(start)
			got := result{Asked: int(asked.Load()), Err: err != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nerror: %v", diff, err)
			}
			if err != nil && !Transient(err) {
				t.Errorf("a 429 given up on is not transient: %v", err)
			}
			if err == nil && resp.RetryAfter != 1 {
				t.Errorf("the claim's answer: %+v", resp)
			}
			if took > tc.deadline {
				t.Errorf("took %v, past the deadline %v", took, tc.deadline)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)
	got, want := map[string]time.Duration{}, map[string]time.Duration{}
	for v, d := range map[string]time.Duration{
		"":                              defaultRetryAfter,
		"2":                             2 * time.Second,
		"0":                             minRetryAfter,
		"-5":                            minRetryAfter,
		"3600":                          maxRetryAfter,
		"soon":                          defaultRetryAfter,
		"Mon, 07 Dec 2026 15:00:03 GMT": 3 * time.Second,
		"Mon, 07 Dec 2026 14:00:00 GMT": minRetryAfter,
		"Tue, 08 Dec 2026 15:00:00 GMT": maxRetryAfter,
	} {
		got[v], want[v] = retryAfter(v, now), d
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retryAfter (-want +got):\n%s", diff)
	}
}

// TestFetchDBWaitsRetryAfter: a DB request limited by the service (429) is
// asked again no sooner than its Retry-After, though FetchDB's own wait is
// shorter.
func TestFetchDBWaitsRetryAfter(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if asked.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, archive)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, strings.TrimPrefix(srv.URL, "http://"))
	dst, err := os.CreateTemp(t.TempDir(), "db")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	var waits []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.FetchDB(ctx, archiveDigest(), dst, func(_ error, wait time.Duration) { waits = append(waits, wait) }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{time.Second}, waits); diff != "" || asked.Load() != 2 {
		t.Errorf("asked %d times, waits (-want +got):\n%s", asked.Load(), diff)
	}
}
