// Package vulndb makes sure the vulnerability DB is on the node before any
// image is judged: downloaded from the configured repository when it is
// missing or stale, or taken as it is from a pre-seeded directory when
// updates are off (air-gapped clusters). Any failure is returned, and the
// scanner then removes nothing.
package vulndb

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/aquasecurity/trivy-db/pkg/metadata"
	trivydb "github.com/aquasecurity/trivy/pkg/db"
	ftypes "github.com/aquasecurity/trivy/pkg/fanal/types"
	xhttp "github.com/aquasecurity/trivy/pkg/x/http"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Options say where the DB lives and comes from.
type Options struct {
	// CacheDir holds the DB in CacheDir/db, as Trivy lays it out.
	CacheDir string
	// Repo is the OCI repository of the DB; without a tag, the schema's.
	Repo string
	// SkipUpdate never downloads.
	SkipUpdate bool
	// DownloadTimeout bounds the download (dbDownloadTimeout); zero or
	// less means scanconfig.DefaultDBDownloadTimeout, never no deadline.
	DownloadTimeout time.Duration
}

// ErrDownloadTimeout is the error of a download that ran out of its
// DownloadTimeout.
var ErrDownloadTimeout = errors.New("timed out")

func (o Options) downloadTimeout() time.Duration {
	if o.DownloadTimeout <= 0 {
		return scanconfig.DefaultDBDownloadTimeout
	}
	return o.DownloadTimeout
}

// Dir is where the DB files are.
func (o Options) Dir() string { return trivydb.Dir(o.CacheDir) }

// Prepare returns the directory of a usable DB, downloading it if needed.
// downloaded tells whether it did.
func Prepare(ctx context.Context, o Options) (dir string, downloaded bool, err error) {
	dir = o.Dir()
	var opts []trivydb.Option
	if !o.SkipUpdate {
		ref, err := scanshare.DBReference(o.Repo)
		if err != nil {
			return "", false, err
		}
		opts = append(opts, trivydb.WithDBRepository([]name.Reference{ref}))
	}
	client := trivydb.NewClient(dir, true, opts...)
	need, err := client.NeedsUpdate(ctx, "", o.SkipUpdate)
	if err != nil {
		if o.SkipUpdate {
			return "", false, fmt.Errorf("no usable vulnerability DB in %s and skipDBUpdate is on (pre-seed trivy.db and metadata.json there): %w", dir, err)
		}
		return "", false, fmt.Errorf("checking the vulnerability DB in %s: %w", dir, err)
	}
	if !need {
		return dir, false, nil
	}
	if err := download(ctx, client, dir, o.downloadTimeout()); err != nil {
		return "", false, fmt.Errorf("downloading the vulnerability DB from %s into %s: %w", o.Repo, dir, err)
	}
	return dir, true, nil
}

// download gives the download a deadline of its own. A registry that
// accepts connections and never answers (a proxy swallowing traffic) would
// otherwise hold the run until the pod's run timeout, which ends it without
// saying why. Only this deadline is reported as the timeout: the caller's
// own cancellation is passed on as it is.
func download(ctx context.Context, client *trivydb.Client, dir string, timeout time.Duration) error {
	dctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrDownloadTimeout)
	defer cancel()
	// Trivy does not hand its context to the registry client, whose
	// requests then carry none: the deadline is put on each request by the
	// transport instead.
	dctx = xhttp.WithTransport(dctx, deadlineTransport{parent: ctx, ctx: dctx})
	err := client.Download(dctx, dir, ftypes.RegistryOptions{})
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(dctx), ErrDownloadTimeout) {
		return fmt.Errorf("%w: no DB after %v (components.scanner.config dbDownloadTimeout): %w", ErrDownloadTimeout, timeout, err)
	}
	return err
}

// deadlineTransport builds the transport Trivy would use, with ctx's end
// added to every request's own context (the registry client makes its own,
// from none). Cancelling a request's context also ends the reading of its
// body, so a stalled layer download ends too.
type deadlineTransport struct {
	parent context.Context // where Trivy would otherwise find its transport
	ctx    context.Context
}

func (t deadlineTransport) Build(opts ...xhttp.TransportOption) http.RoundTripper {
	return deadlineRoundTripper{base: xhttp.RoundTripper(t.parent, opts...), ctx: t.ctx}
}

type deadlineRoundTripper struct {
	base http.RoundTripper
	ctx  context.Context
}

func (rt deadlineRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(rt.ctx, func() { cancel(context.Cause(rt.ctx)) })
	done := func() {
		stop()
		cancel(nil)
	}
	resp, err := rt.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	// The request's context must last while its body is read.
	resp.Body = &doneBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

type doneBody struct {
	io.ReadCloser
	done func()
}

func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// Info reads what the DB in dir says of itself (metadata.json): its schema
// version, when it was built, downloaded and is due to be replaced. Zero
// times are left out.
func Info(dir string) (*workerresult.ScanDB, error) {
	m, err := metadata.NewClient(dir).Get()
	if err != nil {
		return nil, fmt.Errorf("reading the vulnerability DB's metadata in %s: %w", dir, err)
	}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	return &workerresult.ScanDB{Version: m.Version, UpdatedAt: at(m.UpdatedAt), DownloadedAt: at(m.DownloadedAt), NextUpdate: at(m.NextUpdate)}, nil
}

// maxDBFile bounds each file extracted from a DB archive: Trivy's DB is
// about a gigabyte unpacked.
const maxDBFile = 8 << 30

// Install unpacks a DB archive (Trivy's DB layer: a gzipped tar of
// trivy.db and metadata.json) into o.Dir(), replacing what was there. Only
// those two files are taken, by their base names: an archive cannot write
// anywhere else.
func Install(archive io.Reader, o Options) (string, error) {
	dir := o.Dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gz, err := gzip.NewReader(archive)
	if err != nil {
		return "", fmt.Errorf("the DB archive: %w", err)
	}
	tr := tar.NewReader(gz)
	got := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("the DB archive: %w", err)
		}
		name := path.Clean(h.Name)
		if h.Typeflag != tar.TypeReg || (name != "trivy.db" && name != "metadata.json") {
			continue
		}
		if h.Size > maxDBFile {
			return "", fmt.Errorf("the DB archive: %s is %d bytes", name, h.Size)
		}
		tmp, err := os.CreateTemp(dir, name+".*")
		if err != nil {
			return "", err
		}
		_, err = io.Copy(tmp, io.LimitReader(tr, maxDBFile))
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return "", fmt.Errorf("unpacking %s: %w", name, err)
		}
		got[name] = true
	}
	if !got["trivy.db"] || !got["metadata.json"] {
		return "", errors.New("the DB archive lacks trivy.db or metadata.json")
	}
	return dir, nil
}
