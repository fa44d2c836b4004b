package registrycheck_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/eraser-oss/eraser/internal/node/registrycheck"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

// log records the requests a server saw, as "METHOD path auth".
type log struct {
	mu   sync.Mutex
	seen []string
}

func (l *log) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		auth, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		l.seen = append(l.seen, r.Method+" "+r.URL.Path+" "+auth)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *log) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// pushed is a real registry holding one image, and that image's content.
func pushed(t *testing.T, wrap func(http.Handler) http.Handler) (host string, ct registrycheck.Content) {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	dg, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg := testregistry.Handler()
	host = testregistry.Serve(t, wrap(reg))
	direct := testregistry.Serve(t, reg)
	if err := testregistry.Push(direct, "team/app:1", img); err != nil {
		t.Fatal(err)
	}
	return host, registrycheck.Content{Host: host, Name: "team/app", Digest: dg.String()}
}

func gone(ct registrycheck.Content) registrycheck.Content {
	ct.Digest = "sha256:" + strings.Repeat("0", 64)
	return ct
}

type answer struct {
	Answer registrycheck.Answer
	Detail string
}

// TestCheckRegistry asks a real registry (go-containerregistry's, on
// loopback) about content it has and content it has not.
func TestCheckRegistry(t *testing.T) {
	var l log
	host, ct := pushed(t, l.wrap)
	c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host}})
	got := map[string]answer{}
	for label, q := range map[string]registrycheck.Content{"present": ct, "gone": gone(ct)} {
		r := c.Check(context.Background(), q)
		got[label] = answer{r.Answer, r.Detail}
	}
	want := map[string]answer{
		"present": {registrycheck.Present, host + ": 200"},
		"gone":    {registrycheck.Gone, host + ": 404 not found"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := c.Requests(); n != 2 {
		t.Errorf("%d requests, want 2: %v", n, l.seen)
	}
}

// tokenServer is a registry's token service: it gives a token to any
// request with the credentials u:p, and to anonymous requests when anon.
func tokenServer(t *testing.T, anon bool, l *log) *httptest.Server {
	srv := httptest.NewServer(l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if (!ok && !anon) || (ok && (u != "u" || p != "p")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("scope") != "repository:team/app:pull" || r.URL.Query().Get("service") != "reg" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, `{"token":"tok"}`)
	})))
	t.Cleanup(srv.Close)
	return srv
}

// bearer guards a registry with a token: without the token's bearer, 401
// with the challenge.
func bearer(realm string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer tok" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`",service="reg",scope="repository:team/app:pull"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// basic guards a registry with basic authentication.
func basic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
			w.Header().Set("WWW-Authenticate", `Basic realm="reg"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestCheckAuth: the token flow, with and without the operator's
// credentials, and basic authentication.
func TestCheckAuth(t *testing.T) {
	type got struct {
		Answer   registrycheck.Answer
		Detail   string
		Requests int
		Token    []string
	}
	for name, tc := range map[string]struct {
		anon   bool
		basic  bool
		creds  registrycheck.Credentials
		wrong  bool
		want   got
		detail string
	}{
		"token with credentials":    {creds: registrycheck.Credentials{"HOST": {"u", "p"}}, want: got{Answer: registrycheck.Present, Detail: "200", Requests: 3, Token: []string{"GET /token Basic"}}},
		"anonymous token":           {anon: true, want: got{Answer: registrycheck.Present, Detail: "200", Requests: 3, Token: []string{"GET /token "}}},
		"token refused":             {want: got{Answer: registrycheck.Unknown, Detail: "401, and authenticating failed: token: 401 from TOKEN", Requests: 2, Token: []string{"GET /token "}}},
		"wrong credentials":         {creds: registrycheck.Credentials{"HOST": {"u", "x"}}, want: got{Answer: registrycheck.Unknown, Detail: "401, and authenticating failed: token: 401 from TOKEN", Requests: 2, Token: []string{"GET /token Basic"}}},
		"basic":                     {basic: true, creds: registrycheck.Credentials{"HOST": {"u", "p"}}, want: got{Answer: registrycheck.Present, Detail: "200", Requests: 2}},
		"basic without credentials": {basic: true, want: got{Answer: registrycheck.Unknown, Detail: "401, and authenticating failed: the registry asks for credentials and none are configured for HOST", Requests: 1}},
		"basic refused":             {basic: true, creds: registrycheck.Credentials{"HOST": {"u", "x"}}, want: got{Answer: registrycheck.Unknown, Detail: "401 unauthorized after authenticating: the credentials were refused or lack pull access", Requests: 2}},
	} {
		t.Run(name, func(t *testing.T) {
			var tl log
			tokens := tokenServer(t, tc.anon, &tl)
			wrap := bearer(tokens.URL + "/token")
			if tc.basic {
				wrap = basic
			}
			host, ct := pushed(t, wrap)
			creds := registrycheck.Credentials{}
			for h, c := range tc.creds {
				creds[strings.ReplaceAll(h, "HOST", host)] = c
			}
			tokenHost := strings.TrimPrefix(tokens.URL, "http://")
			c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host, tokenHost}, Credentials: creds})
			r := c.Check(context.Background(), ct)
			g := got{Answer: r.Answer, Detail: strings.TrimPrefix(r.Detail, host+": "), Requests: c.Requests(), Token: tl.seen}
			want := tc.want
			want.Detail = strings.NewReplacer("HOST", host, "TOKEN", tokenHost).Replace(want.Detail)
			if diff := cmp.Diff(want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckTokenReused: one token serves a run's checks of a repository.
func TestCheckTokenReused(t *testing.T) {
	var tl log
	tokens := tokenServer(t, true, &tl)
	host, ct := pushed(t, bearer(tokens.URL+"/token"))
	c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host, strings.TrimPrefix(tokens.URL, "http://")}})
	for _, q := range []registrycheck.Content{ct, gone(ct)} {
		c.Check(context.Background(), q)
	}
	if n := tl.count(); n != 1 {
		t.Errorf("%d token requests, want 1", n)
	}
}

// TestCheckMirrors: a mirror that has the content answers for the
// registry, which is not asked; a mirror without it does not, and the
// registry is.
func TestCheckMirrors(t *testing.T) {
	var rl log
	host, ct := pushed(t, rl.wrap)
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The mirror holds the content under the registry's name: its own
	// image pushed there would have another digest, so the mirror serves
	// the registry's bytes by proxying them.
	var ml log
	hasIt := testregistry.Serve(t, ml.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("ns") != host {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})))
	empty := testregistry.Start(t)
	if err := testregistry.Push(empty, "team/app:other", img); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mirrors      []string
		want         answer
		registryAsks int
	}{
		"mirror has it":          {mirrors: []string{"http://" + hasIt}, want: answer{registrycheck.Present, "mirror " + hasIt + ": 200"}},
		"mirror without it":      {mirrors: []string{empty}, want: answer{registrycheck.Present, host + ": 200"}, registryAsks: 1},
		"second mirror has it":   {mirrors: []string{empty, hasIt}, want: answer{registrycheck.Present, "mirror " + hasIt + ": 200"}},
		"mirror down":            {mirrors: []string{"http://127.0.0.1:1"}, want: answer{registrycheck.Present, host + ": 200"}, registryAsks: 1},
		"mirror not an endpoint": {mirrors: []string{"ftp://x"}, want: answer{registrycheck.Present, host + ": 200"}, registryAsks: 1},
	} {
		t.Run(name, func(t *testing.T) {
			before := rl.count()
			c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host, hasIt, empty}, Mirrors: map[string][]string{host: tc.mirrors}})
			r := c.Check(context.Background(), ct)
			if diff := cmp.Diff(tc.want, answer{r.Answer, r.Detail}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := rl.count() - before; n != tc.registryAsks {
				t.Errorf("the registry was asked %d times, want %d", n, tc.registryAsks)
			}
		})
	}
}

// TestCheckUnreachable: a registry that does not answer is unknown, with
// why, and is not asked again in the run; one that fails is unknown.
func TestCheckUnreachable(t *testing.T) {
	stopped := httptest.NewServer(http.NotFoundHandler())
	down := strings.TrimPrefix(stopped.URL, "http://")
	stopped.Close()
	failing := testregistry.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := testregistry.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	d := "sha256:" + strings.Repeat("1", 64)
	c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{down, failing, slow}, Timeout: 100 * time.Millisecond})
	got := map[string]answer{}
	for label, q := range map[string]registrycheck.Content{
		"stopped": {Host: down, Name: "a", Digest: d}, "5xx": {Host: failing, Name: "a", Digest: d}, "slow": {Host: slow, Name: "a", Digest: d},
	} {
		r := c.Check(context.Background(), q)
		got[label] = answer{r.Answer, r.Detail}
	}
	r := c.Check(context.Background(), registrycheck.Content{Host: down, Name: "b", Digest: d})
	got["stopped again"] = answer{r.Answer, r.Detail}
	for k, v := range got {
		// The OS's words for a refused connection and the client's for a
		// timeout vary: their kind is what is checked.
		kind, _, _ := strings.Cut(strings.TrimPrefix(v.Detail, strings.SplitN(v.Detail, ": ", 2)[0]+": "), ":")
		got[k] = answer{v.Answer, kind}
	}
	want := map[string]answer{
		"stopped":       {registrycheck.Unknown, "connection"},
		"5xx":           {registrycheck.Unknown, "503"},
		"slow":          {registrycheck.Unknown, "timeout"},
		"stopped again": {registrycheck.Unknown, "not asked"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := c.Requests(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// TestCheckBound: beyond the run's bound nothing is asked.
func TestCheckBound(t *testing.T) {
	var l log
	host, ct := pushed(t, l.wrap)
	c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host}, MaxRequests: 1})
	first := c.Check(context.Background(), ct)
	second := c.Check(context.Background(), gone(ct))
	got := []answer{{first.Answer, first.Detail}, {second.Answer, second.Detail}}
	want := []answer{{registrycheck.Present, host + ": 200"}, {registrycheck.Unknown, host + ": not asked: the run's bound of 1 requests was reached"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if l.count() != 1 {
		t.Errorf("%d requests reached the registry, want 1", l.count())
	}
}

// TestCheckCache: a later run answers from the node's cache while the
// answers stand, and asks again once they expire (present sooner than
// gone); unknown answers are never cached.
func TestCheckCache(t *testing.T) {
	var l log
	host, ct := pushed(t, l.wrap)
	path := filepath.Join(t.TempDir(), registrycheck.CacheFile)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stopped := httptest.NewServer(http.NotFoundHandler())
	down := strings.TrimPrefix(stopped.URL, "http://")
	stopped.Close()
	unknown := registrycheck.Content{Host: down, Name: "a", Digest: ct.Digest}
	run := func(at time.Time) map[string]string {
		c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host, down}, CachePath: path, Now: func() time.Time { return at }})
		if c.CacheErr != nil {
			t.Fatal(c.CacheErr)
		}
		got := map[string]string{}
		for label, q := range map[string]registrycheck.Content{"present": ct, "gone": gone(ct), "unknown": unknown} {
			r := c.Check(context.Background(), q)
			got[label] = string(r.Answer) + map[bool]string{true: " (cached)"}[r.Cached]
		}
		if err := c.Save(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := map[string]map[string]string{
		"first":       run(now),
		"within hour": run(now.Add(30 * time.Minute)),
		"after hour":  run(now.Add(90 * time.Minute)),
		"after a day": run(now.Add(25 * time.Hour)),
	}
	want := map[string]map[string]string{
		"first":       {"present": "present", "gone": "gone", "unknown": "unknown"},
		"within hour": {"present": "present (cached)", "gone": "gone (cached)", "unknown": "unknown"},
		"after hour":  {"present": "present", "gone": "gone (cached)", "unknown": "unknown"},
		"after a day": {"present": "present", "gone": "gone", "unknown": "unknown"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A foreign file is an empty cache, told.
	if err := os.WriteFile(path, []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := registrycheck.New(registrycheck.Config{CachePath: path}); c.CacheErr == nil {
		t.Error("a foreign cache file read without an error")
	}
}

// TestCheckTLS: https is the default, and a registry whose certificate
// the node does not trust is unknown.
func TestCheckTLS(t *testing.T) {
	srv := httptest.NewTLSServer(testregistry.Handler())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	d := "sha256:" + strings.Repeat("1", 64)
	got := map[string]answer{}
	untrusted := registrycheck.New(registrycheck.Config{}).Check(context.Background(), registrycheck.Content{Host: host, Name: "a", Digest: d})
	got["untrusted"] = answer{untrusted.Answer, strings.SplitN(strings.TrimPrefix(untrusted.Detail, host+": "), ":", 2)[0]}
	trusted := registrycheck.New(registrycheck.Config{Transport: srv.Client().Transport}).Check(context.Background(), registrycheck.Content{Host: host, Name: "a", Digest: d})
	got["trusted"] = answer{trusted.Answer, trusted.Detail}
	want := map[string]answer{
		"untrusted": {registrycheck.Unknown, "TLS"},
		"trusted":   {registrycheck.Gone, host + ": 404 not found"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCheckWithoutHead: a registry that refuses HEAD is asked by GET, and
// an error code in the body is read.
func TestCheckWithoutHead(t *testing.T) {
	host := testregistry.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no"}]}`)
	}))
	c := registrycheck.New(registrycheck.Config{PlainHTTP: []string{host}})
	r := c.Check(context.Background(), registrycheck.Content{Host: host, Name: "a", Digest: "sha256:" + strings.Repeat("1", 64)})
	if diff := cmp.Diff(answer{registrycheck.Gone, host + ": 400 MANIFEST_UNKNOWN"}, answer{r.Answer, r.Detail}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
