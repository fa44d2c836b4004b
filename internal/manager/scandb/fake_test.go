package scandb

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// What the mirror's tests run it against: a registry holding a DB
// artifact, a clock they move, and a record of the fetches.

// dbRegistry is a registry on loopback holding a DB artifact, which counts
// the requests for the DB's manifest and archive and can refuse them.
type dbRegistry struct {
	repo string
	mu   sync.Mutex
	// manifests and blobs count the GETs of the DB's manifest and archive.
	manifests, blobs int
	refuse           int // status to answer every request with; 0: none
	corrupt          bool
}

func newRegistry(t *testing.T) *dbRegistry {
	t.Helper()
	r := &dbRegistry{}
	inner := testregistry.Handler()
	host := testregistry.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		refuse, corrupt := r.refuse, r.corrupt
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
			r.manifests++
		}
		isBlob := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/")
		if isBlob {
			r.blobs++
		}
		r.mu.Unlock()
		if refuse != 0 && req.URL.Path != "/v2/" {
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"retry later"}]}`, refuse)
			return
		}
		if corrupt && isBlob {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			b := rec.Body.Bytes()
			if len(b) > 0 {
				b[len(b)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(b)
			return
		}
		inner.ServeHTTP(w, req)
	}))
	r.repo = host + "/aquasecurity/trivy-db"
	return r
}

// push publishes a DB archive with the given content under the schema's
// tag, and returns its digest.
func (r *dbRegistry) push(t *testing.T, content string) string {
	t.Helper()
	layer := static.NewLayer([]byte(content), types.MediaType(MediaType))
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.repo + ":" + scanshare.DBSchemaTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *dbRegistry) set(f func(*dbRegistry)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *dbRegistry) counts() (manifests, blobs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifests, r.blobs
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fetches struct {
	mu  sync.Mutex
	got []string
}

func (f *fetches) record(result string, _ int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, result)
}

func (f *fetches) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func newMirror(t *testing.T, c *fakeClock, f *fetches) *Mirror {
	return New(Options{Dir: t.TempDir(), Refresh: time.Hour, MaxAge: 24 * time.Hour, Backoff: time.Minute, MaxBackoff: 10 * time.Minute,
		Timeout: time.Minute, Now: c.now, Fetched: f.record})
}
