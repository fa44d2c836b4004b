package scandb

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// settle asks until no fetch runs, and returns the state then.
func settle(t *testing.T, m *Mirror, repo string) State {
	t.Helper()
	wait.For(t, time.Minute, "the fetch to end", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		r := m.repos[repo]
		return r == nil || !r.fetching
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.repos[repo]
	st := State{Err: r.lastErr, RateLimited: r.rateLimit}
	if r.db != nil {
		db := *r.db
		st.DB = &db
	}
	return st
}

// TestOneDownloadPerUpdate: the archive is downloaded once, checked
// against its digest and served from disk; a check after Refresh asks for
// the manifest only, until the repository holds a new DB.
func TestOneDownloadPerUpdate(t *testing.T) {
	reg := newRegistry(t)
	first := reg.push(t, "db build 1")
	c, f := &fakeClock{t: time.Unix(1.8e9, 0)}, &fetches{}
	m := newMirror(t, c, f)

	if st := m.Get(reg.repo); st.DB != nil || !st.Fetching {
		t.Fatalf("first Get: %+v, want a fetch started and no DB yet", st)
	}
	st := settle(t, m, reg.repo)
	if st.DB == nil || st.DB.Digest != first || st.DB.Size != int64(len("db build 1")) {
		t.Fatalf("after the fetch: %+v %v", st.DB, st.Err)
	}
	file, err := m.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(file)
	file.Close()
	if string(b) != "db build 1" {
		t.Fatalf("served %q", b)
	}
	for range 50 {
		if got := m.Get(reg.repo); got.DB == nil || got.DB.Digest != first || got.Fetching {
			t.Fatalf("a Get within Refresh: %+v", got)
		}
	}
	c.add(2 * time.Hour)
	m.Get(reg.repo)
	settle(t, m, reg.repo)
	if _, blobs := reg.counts(); blobs != 1 {
		t.Fatalf("%d archive downloads after an unchanged check, want 1", blobs)
	}

	second := reg.push(t, "db build 2")
	c.add(2 * time.Hour)
	m.Get(reg.repo)
	if st := settle(t, m, reg.repo); st.DB == nil || st.DB.Digest != second {
		t.Fatalf("after the update: %+v", st.DB)
	}
	if got, want := f.list(), []string{Downloaded, Unchanged, Downloaded}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("fetches %v, want %v", got, want)
	}
	// The previous archive is kept for the runs that started with it.
	for _, d := range []string{first, second} {
		if _, err := os.Stat(m.path(d)); err != nil {
			t.Errorf("archive %s: %v", d, err)
		}
	}
}

// TestRateLimited: a repository that answers 429 leaves the run without a
// DB, says so, and is not asked again before the backoff; the previous
// copy serves while within MaxAge.
func TestRateLimited(t *testing.T) {
	reg := newRegistry(t)
	digest := reg.push(t, "db build 1")
	c, f := &fakeClock{t: time.Unix(1.8e9, 0)}, &fetches{}
	m := newMirror(t, c, f)

	reg.set(func(r *dbRegistry) { r.refuse = http.StatusTooManyRequests })
	m.Get(reg.repo)
	st := settle(t, m, reg.repo)
	if st.DB != nil || st.Err == nil || !st.RateLimited {
		t.Fatalf("rate-limited first fetch: %+v", st)
	}
	manifests, _ := reg.counts()
	c.add(30 * time.Second)
	if got := m.Get(reg.repo); got.Fetching || got.DB != nil || !got.RateLimited {
		t.Fatalf("within the backoff: %+v", got)
	}
	if again, _ := reg.counts(); again != manifests {
		t.Fatalf("asked again within the backoff (%d manifest requests, were %d)", again, manifests)
	}

	reg.set(func(r *dbRegistry) { r.refuse = 0 })
	c.add(time.Minute)
	m.Get(reg.repo)
	if st := settle(t, m, reg.repo); st.DB == nil || st.DB.Digest != digest {
		t.Fatalf("after the backoff: %+v", st)
	}

	// Refused again later: the copy serves until it is MaxAge old.
	reg.set(func(r *dbRegistry) { r.refuse = http.StatusTooManyRequests })
	c.add(2 * time.Hour)
	m.Get(reg.repo)
	settle(t, m, reg.repo)
	if got := m.Get(reg.repo); got.DB == nil || !got.RateLimited {
		t.Fatalf("refused within MaxAge: %+v, want the previous copy and the reason", got)
	}
	c.add(24 * time.Hour)
	if got := m.Get(reg.repo); got.DB != nil {
		t.Fatalf("refused past MaxAge: %+v, want no DB", got)
	}
}

// TestCorruptArchive: an archive whose bytes do not match the manifest's
// digest is never kept.
func TestCorruptArchive(t *testing.T) {
	reg := newRegistry(t)
	reg.push(t, "db build 1")
	reg.set(func(r *dbRegistry) { r.corrupt = true })
	c := &fakeClock{t: time.Unix(1.8e9, 0)}
	m := newMirror(t, c, &fetches{})
	m.Get(reg.repo)
	st := settle(t, m, reg.repo)
	if st.DB != nil || st.Err == nil {
		t.Fatalf("a corrupt archive: %+v", st)
	}
	if entries, _ := os.ReadDir(m.o.Dir); len(entries) != 0 {
		t.Fatalf("left %d files behind", len(entries))
	}
}

// TestThroughProxy: with a proxy set, the download goes through it, the
// registry on loopback included (HTTPS_PROXY would skip loopback).
func TestThroughProxy(t *testing.T) {
	reg := newRegistry(t)
	digest := reg.push(t, "db build 1")
	var mu sync.Mutex
	var proxied []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		proxied = append(proxied, req.Method+" "+req.URL.Path)
		mu.Unlock()
		// A forward proxy's request names the whole URL; pass it on.
		out := req.Clone(req.Context())
		out.RequestURI = ""
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	u, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{Dir: t.TempDir(), Refresh: time.Hour, MaxAge: time.Hour, Backoff: time.Minute, MaxBackoff: time.Minute,
		Timeout: time.Minute, Transport: Transport(u)})
	m.Get(reg.repo)
	if st := settle(t, m, reg.repo); st.DB == nil || st.DB.Digest != digest {
		t.Fatalf("through the proxy: %+v %v", st.DB, st.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	blob := false
	for _, p := range proxied {
		blob = blob || strings.HasPrefix(p, "GET /v2/aquasecurity/trivy-db/blobs/")
	}
	if !blob {
		t.Errorf("the proxy saw %q, not the archive's download", proxied)
	}
}

// TestMirrorReadsMetadata: the copy names the DB's schema and build time
// from the archive's metadata.json, which the run's scanners then report;
// an archive without it still serves, naming neither (the scanners that
// open it check it themselves).
func TestMirrorReadsMetadata(t *testing.T) {
	type named struct {
		Schema int
		Built  time.Time
	}
	cases := map[string]struct {
		archive []byte
		want    named
	}{
		"with metadata.json": {archive: dbArchive(t, [2]string{"trivy.db", "bolt"}, [2]string{"metadata.json", trivyMetadata}),
			want: named{Schema: 2, Built: time.Date(2026, 12, 5, 6, 0, 0, 0, time.UTC)}},
		"without": {archive: []byte("db build 1")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reg := newRegistry(t)
			digest := reg.push(t, string(tc.archive))
			m := newMirror(t, &fakeClock{t: time.Unix(1.8e9, 0)}, &fetches{})
			m.Get(reg.repo)
			st := settle(t, m, reg.repo)
			if st.DB == nil || st.DB.Digest != digest {
				t.Fatalf("after the fetch: %+v %v", st.DB, st.Err)
			}
			if diff := cmp.Diff(tc.want, named{st.DB.Schema, st.DB.Built}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// settleArchive asks for an archive by digest until its fetch ends.
func settleArchive(t *testing.T, m *Mirror, repo, digest string) State {
	t.Helper()
	var st State
	wait.For(t, time.Minute, "the archive's fetch to end", func() bool {
		st = m.Archive(repo, digest)
		return !st.Fetching
	})
	return st
}

// TestArchiveOfARunningRun: a new leader, on a new disk, is asked for the
// archive of a run the previous leader started, after the repository moved
// on: it fetches that archive by digest, says so to the scanners meanwhile
// (ErrFetching), then serves it; a leader restarted on the same disk
// serves it without a download, and takes it for the repository's copy
// when the repository holds it again; an archive the repository does not
// hold is a failure, not a wait; past MaxAge the run's archive is removed.
func TestArchiveOfARunningRun(t *testing.T) {
	reg := newRegistry(t)
	run := reg.push(t, "db build 1")
	reg.push(t, "db build 2")
	c, f := &fakeClock{t: time.Unix(1.8e9, 0)}, &fetches{}
	m := newMirror(t, c, f)

	if st := m.Archive(reg.repo, run); st.DB != nil || !st.Fetching {
		t.Fatalf("first Archive: %+v, want a fetch started", st)
	}
	if _, err := m.Open(run); err != nil && !errors.Is(err, ErrFetching) {
		t.Fatalf("Open while fetching: %v, want ErrFetching or the archive", err)
	}
	st := settleArchive(t, m, reg.repo, run)
	if st.DB == nil || st.DB.Digest != run || st.DB.Size != int64(len("db build 1")) {
		t.Fatalf("after the fetch: %+v %v", st.DB, st.Err)
	}
	file, err := m.Open(run)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(file)
	file.Close()
	if string(b) != "db build 1" {
		t.Fatalf("served %q", b)
	}

	restarted := New(Options{Dir: m.o.Dir, Refresh: time.Hour, MaxAge: 24 * time.Hour, Backoff: time.Minute, MaxBackoff: 10 * time.Minute,
		Timeout: time.Minute, Now: c.now, Fetched: f.record})
	if st := restarted.Archive(reg.repo, run); st.DB == nil || st.DB.Digest != run || st.Fetching {
		t.Fatalf("Archive after a restart on the same disk: %+v", st)
	}
	if _, blobs := reg.counts(); blobs != 1 {
		t.Fatalf("%d archive downloads, want 1", blobs)
	}
	// The repository's copy, when it is the archive on disk, is not
	// downloaded again.
	reg.push(t, "db build 1")
	restarted.Get(reg.repo)
	if st := settle(t, restarted, reg.repo); st.DB == nil || st.DB.Digest != run {
		t.Fatalf("the repository's copy on a disk that holds it: %+v %v", st.DB, st.Err)
	}
	if _, blobs := reg.counts(); blobs != 1 {
		t.Fatalf("%d archive downloads, want 1", blobs)
	}

	missing := "sha256:" + strings.Repeat("e", 64)
	if st := settleArchive(t, m, reg.repo, missing); st.DB != nil || st.Err == nil {
		t.Fatalf("an archive the repository does not hold: %+v", st)
	}
	if _, err := m.Open(missing); err == nil || errors.Is(err, ErrFetching) {
		t.Fatalf("Open of an archive no one holds: %v, want a plain failure", err)
	}
	if got, want := f.list(), []string{Downloaded, Unchanged, Failed}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("fetches %v, want %v", got, want)
	}

	// Past MaxAge, and no repository's copy, the run's archive goes with
	// the next download's pruning.
	c.add(25 * time.Hour)
	reg.push(t, "db build 3")
	m.Get(reg.repo)
	if st := settle(t, m, reg.repo); st.DB == nil || st.DB.Digest == run {
		t.Fatalf("the repository's new copy: %+v %v", st.DB, st.Err)
	}
	if _, err := os.Stat(m.path(run)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's archive past MaxAge: %v, want it removed", err)
	}
}
