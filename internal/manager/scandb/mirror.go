// Package scandb fetches the vulnerability DB once for the whole cluster:
// the leader downloads Trivy's DB archive from the configured repository
// (through the manager's proxy settings and credentials), checks it
// against its digest, keeps it on disk, and the scan service hands it to
// the run's scanners, which then never contact the repository.
//
// A repository is asked again only when the copy is due a check, and the
// archive is downloaded again only when its digest changed: one download
// per DB update, whatever the number of nodes and runs. A failed fetch is
// retried with backoff; meanwhile the previous copy serves while it is
// within its age limit.
package scandb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// MediaType is the media type of the DB archive in Trivy's OCI artifact.
const MediaType = "application/vnd.aquasec.trivy.db.layer.v1.tar+gzip"

// Options configure a Mirror.
type Options struct {
	// Dir keeps the archives (an emptyDir of the manager's pod).
	Dir string
	// Refresh is how long a copy is used before the repository is asked
	// whether a newer DB exists (Trivy's DB is rebuilt every few hours).
	Refresh time.Duration
	// MaxAge is how long a copy still serves after the repository stopped
	// answering.
	MaxAge time.Duration
	// Backoff is the first wait after a failed fetch; each failure in a
	// row doubles it, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one fetch.
	Timeout time.Duration
	// Keychain finds the repository's credentials; Transport carries the
	// requests (proxies). Both default to go-containerregistry's.
	Keychain  authn.Keychain
	Transport http.RoundTripper
	Now       func() time.Time
	// Fetched is told of every fetch: its result (downloaded, unchanged,
	// failed) and the bytes downloaded.
	Fetched func(result string, bytes int64)
}

// Fetch results.
const (
	Downloaded = "downloaded"
	Unchanged  = "unchanged"
	Failed     = "failed"
)

// Mirror holds the DB copies, one per repository. It locks itself.
type Mirror struct {
	o     Options
	mu    sync.Mutex
	repos map[string]*repo
	// replaced are the archives no longer a copy, by when they stopped.
	replaced map[string]time.Time
	// runs are archives asked for by digest (Archive): the DBs of runs a
	// previous leader started, which may no longer be any repository's.
	runs map[string]*repo
}

type repo struct {
	db        *scanshare.DB // the copy, nil until the first fetch succeeds
	checked   time.Time     // when the repository last answered
	fetching  bool
	failures  int
	lastErr   error
	nextTry   time.Time
	rateLimit bool
}

// Transport carries the DB's download: through proxy when one is set (the
// manager's --scan-db-proxy), else as the environment's HTTPS_PROXY and
// NO_PROXY say.
func Transport(proxy *url.URL) http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if proxy != nil {
		t.Proxy = http.ProxyURL(proxy)
	}
	return t
}

// New returns a mirror keeping its copies in o.Dir.
func New(o Options) *Mirror {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Keychain == nil {
		o.Keychain = authn.DefaultKeychain
	}
	if o.Transport == nil {
		o.Transport = remote.DefaultTransport
	}
	if o.Fetched == nil {
		o.Fetched = func(string, int64) {}
	}
	return &Mirror{o: o, repos: map[string]*repo{}, replaced: map[string]time.Time{}, runs: map[string]*repo{}}
}

// State is what the mirror can give a run now.
type State struct {
	// DB is the copy to use; nil when there is none.
	DB *scanshare.DB
	// Fetching: a fetch is running (the first one, when DB is nil).
	Fetching bool
	// Err is the last fetch's failure, while it is not followed by a
	// success; RateLimited says the repository refused for its rate limit.
	Err         error
	RateLimited bool
}

// Get returns the copy of the repository's DB to use now, and starts a
// fetch in the background when there is none, when the copy is due a
// check, or when the last failure's backoff is over. It never blocks on
// the network.
func (m *Mirror) Get(repository string) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.o.Now()
	r := m.repos[repository]
	if r == nil {
		r = &repo{}
		m.repos[repository] = r
	}
	due := r.db == nil || now.Sub(r.checked) >= m.o.Refresh
	if due && !r.fetching && !now.Before(r.nextTry) {
		r.fetching = true
		go m.fetch(repository)
	}
	st := State{Fetching: r.fetching, Err: r.lastErr, RateLimited: r.rateLimit}
	if r.db != nil && now.Sub(r.checked) < m.o.MaxAge {
		db := *r.db
		st.DB = &db
	}
	return st
}

// Archive returns the copy of the archive with this digest, fetched by
// digest from repository when this manager holds none: the DB of a run that
// a previous leader started, which the run keeps to its end though the
// repository may have moved on and this manager's disk may be new. Like
// Get, it never blocks on the network.
func (m *Mirror) Archive(repository, digest string) State {
	if err := scanshare.ValidateDigest(digest); err != nil {
		return State{Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.repos {
		if r.db != nil && r.db.Digest == digest {
			db := *r.db
			return State{DB: &db}
		}
	}
	r := m.runs[digest]
	if r == nil {
		r = &repo{}
		m.runs[digest] = r
		// On this manager's disk already: a manager restarted in its pod.
		if fi, err := os.Stat(m.path(digest)); err == nil {
			r.db = m.describe(digest, repository, fi.Size(), fi.ModTime())
		}
	}
	if r.db != nil {
		db := *r.db
		return State{DB: &db}
	}
	if !r.fetching && !m.o.Now().Before(r.nextTry) {
		r.fetching = true
		go m.fetchArchive(repository, digest)
	}
	return State{Fetching: r.fetching, Err: r.lastErr, RateLimited: r.rateLimit}
}

func (m *Mirror) fetchArchive(repository, digest string) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.Timeout)
	defer cancel()
	db, n, err := m.downloadArchive(ctx, repository, digest)
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[digest]
	r.fetching = false
	if err != nil {
		r.failures++
		r.lastErr = err
		r.rateLimit = rateLimited(err)
		r.nextTry = m.o.Now().Add(backoff(m.o.Backoff, m.o.MaxBackoff, r.failures))
		m.o.Fetched(Failed, n)
		return
	}
	r.db, r.failures, r.lastErr, r.rateLimit = db, 0, nil, false
	m.o.Fetched(Downloaded, n)
}

// downloadArchive fetches the archive by its digest from repository.
func (m *Mirror) downloadArchive(ctx context.Context, repository, digest string) (*scanshare.DB, int64, error) {
	ref, err := scanshare.DBReference(repository)
	if err != nil {
		return nil, 0, err
	}
	layer, err := remote.Layer(ref.Context().Digest(digest), m.remoteOptions(ctx)...)
	if err != nil {
		return nil, 0, fmt.Errorf("%s@%s: %w", ref.Context(), digest, err)
	}
	return m.store(layer, ref, digest, 0)
}

// ErrFetching: the archive asked for is being fetched; ask again shortly.
var ErrFetching = errors.New("the DB archive is being fetched")

// Open opens the archive of a copy by its digest, for the scan service to
// serve. While Archive fetches it, the error is ErrFetching.
func (m *Mirror) Open(digest string) (*os.File, error) {
	if err := scanshare.ValidateDigest(digest); err != nil {
		return nil, err
	}
	f, err := os.Open(m.path(digest))
	if err == nil {
		return f, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[digest]; r != nil && r.fetching {
		return nil, fmt.Errorf("%w: %w", ErrFetching, err)
	}
	return nil, err
}

// describe names an archive on disk, with what its metadata.json says.
func (m *Mirror) describe(digest, repository string, size int64, fetched time.Time) *scanshare.DB {
	db := &scanshare.DB{Digest: digest, Size: size, Repo: repository, Fetched: fetched.UTC()}
	if ref, err := scanshare.DBReference(repository); err == nil {
		db.Repo = ref.String()
	}
	// What the DB says of itself names it in the run's report even on the
	// nodes that never open it; an archive Trivy cannot read fails on the
	// scanners, which check it themselves.
	if md, err := m.metadata(digest); err == nil {
		db.Schema, db.Built = md.Version, md.UpdatedAt.UTC()
	}
	return db
}

func (m *Mirror) metadata(digest string) (Metadata, error) {
	f, err := os.Open(m.path(digest))
	if err != nil {
		return Metadata{}, err
	}
	defer f.Close()
	return ReadMetadata(f)
}

func (m *Mirror) path(digest string) string {
	return filepath.Join(m.o.Dir, strings.Replace(digest, ":", "-", 1)+".tar.gz")
}

func (m *Mirror) fetch(repository string) {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.Timeout)
	defer cancel()
	m.mu.Lock()
	var have string
	if r := m.repos[repository]; r.db != nil {
		have = r.db.Digest
	}
	m.mu.Unlock()

	db, n, err := m.download(ctx, repository, have)
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.repos[repository]
	r.fetching = false
	now := m.o.Now()
	switch {
	case err != nil:
		r.failures++
		r.lastErr = err
		r.rateLimit = rateLimited(err)
		r.nextTry = now.Add(backoff(m.o.Backoff, m.o.MaxBackoff, r.failures))
		m.o.Fetched(Failed, n)
	case db == nil:
		r.failures, r.lastErr, r.rateLimit, r.checked = 0, nil, false, now
		m.o.Fetched(Unchanged, 0)
	default:
		if r.db != nil {
			m.replaced[r.db.Digest] = now
		}
		r.db, r.failures, r.lastErr, r.rateLimit, r.checked = db, 0, nil, false, now
		if n == 0 {
			// Found on disk: only the manifest was read.
			m.o.Fetched(Unchanged, 0)
		} else {
			m.o.Fetched(Downloaded, n)
		}
		m.prune(now)
	}
}

// prune removes the archives that are no repository's copy and were
// replaced longer than MaxAge ago: a run keeps its DB for its whole
// length, and one that started with the previous copy still gets it.
func (m *Mirror) prune(now time.Time) {
	for digest, at := range m.replaced {
		if now.Sub(at) > m.o.MaxAge {
			_ = os.Remove(m.path(digest))
			delete(m.replaced, digest)
		}
	}
	// The archives fetched for runs a previous leader started, likewise.
	held := map[string]bool{}
	for _, r := range m.repos {
		if r.db != nil {
			held[r.db.Digest] = true
		}
	}
	for digest, r := range m.runs {
		if r.db != nil && !held[digest] && now.Sub(r.db.Fetched) > m.o.MaxAge {
			_ = os.Remove(m.path(digest))
			delete(m.runs, digest)
		}
	}
}

// download fetches the repository's manifest and, when its DB archive is
// not the one held (have), the archive. It returns nil and no error when
// the archive is unchanged, and the bytes it downloaded.
func (m *Mirror) download(ctx context.Context, repository, have string) (*scanshare.DB, int64, error) {
	ref, err := scanshare.DBReference(repository)
	if err != nil {
		return nil, 0, err
	}
	img, err := remote.Image(ref, m.remoteOptions(ctx)...)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the DB's manifest from %s: %w", ref, err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the DB's manifest from %s: %w", ref, err)
	}
	var found bool
	var digest string
	var size int64
	for _, l := range manifest.Layers {
		if string(l.MediaType) == MediaType {
			found, digest, size = true, l.Digest.String(), l.Size
			break
		}
	}
	if !found {
		return nil, 0, fmt.Errorf("%s holds no layer of media type %s: not a Trivy DB", ref, MediaType)
	}
	if scanshare.ValidateDigest(digest) != nil {
		return nil, 0, fmt.Errorf("%s: the DB's digest %s is not a sha256 digest", ref, digest)
	}
	if digest == have {
		return nil, 0, nil
	}
	// On disk already, checked when stored: fetched by digest for a run
	// (Archive), or kept on the pod's volume across a restart.
	if fi, err := os.Stat(m.path(digest)); err == nil && (size <= 0 || fi.Size() == size) {
		return m.describe(digest, ref.String(), fi.Size(), fi.ModTime()), 0, nil
	}
	layer, err := img.LayerByDigest(mustHash(digest))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", ref, err)
	}
	return m.store(layer, ref, digest, size)
}

func (m *Mirror) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(m.o.Keychain), remote.WithTransport(m.o.Transport)}
}

// store downloads the layer to the archive's place, checking it against its
// digest (and its size, when the manifest gave one).
func (m *Mirror) store(layer v1.Layer, ref name.Reference, digest string, size int64) (*scanshare.DB, int64, error) {
	rc, err := layer.Compressed()
	if err != nil {
		return nil, 0, fmt.Errorf("downloading the DB from %s: %w", ref, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(m.o.Dir, 0o700); err != nil {
		return nil, 0, err
	}
	tmp, err := os.CreateTemp(m.o.Dir, "download-*")
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, n, fmt.Errorf("downloading the DB from %s: %w", ref, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return nil, n, fmt.Errorf("downloading the DB from %s: the archive's digest is %s, not %s", ref, got, digest)
	}
	if size > 0 && n != size {
		return nil, n, fmt.Errorf("downloading the DB from %s: %d bytes, its manifest says %d", ref, n, size)
	}
	if err := os.Rename(tmp.Name(), m.path(digest)); err != nil {
		return nil, n, err
	}
	return m.describe(digest, ref.String(), n, m.o.Now()), n, nil
}

func rateLimited(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusTooManyRequests {
			return true
		}
		for _, d := range te.Errors {
			if d.Code == transport.TooManyRequestsErrorCode {
				return true
			}
		}
	}
	return false
}

func backoff(first, most time.Duration, failures int) time.Duration {
	d := first
	for i := 1; i < failures && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

func mustHash(digest string) v1.Hash {
	h, err := v1.NewHash(digest)
	if err != nil {
		// download validated it.
		panic(err)
	}
	return h
}
