// Package scanclient is a scanner's side of the manager's scan service: it
// claims and shares verdicts over HTTP, presenting the ServiceAccount token
// the kubelet projects into the scanner's container for the run.
package scanclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Client talks to the scan service of one run.
type Client struct {
	// Base is the service's address, http://host:port, when the pod was
	// made; ServiceFile, if set and not empty, holds its address now (a
	// new leader announces itself there), read on each request.
	Base        string
	ServiceFile string
	// JobUID is the run's job UID, which the paths and the token's
	// audience name.
	JobUID string
	// TokenFile is the projected token, read on each request: the kubelet
	// renews it in place.
	TokenFile string
	HTTP      *http.Client
	// FirstWait is FetchDB's first wait before asking again, doubled up to
	// ten times it; 0 is a second.
	FirstWait time.Duration
	// DBSize is the run's archive's size (scanshare.EnvDBSize): the DB's
	// download reads no more than that. 0 (not given) reads at most
	// MaxDBArchive.
	DBSize int64
}

// MaxDBArchive bounds the DB archive a scanner downloads when the pod spec
// does not give its size: many times Trivy's (some tens of MB), and far
// below the scanner's cache volume's limit.
const MaxDBArchive = 1 << 30

// dbDownloadTimeout bounds the DB's download when the caller gives no
// deadline: a service that trickles the archive must not hold the scanner
// until the run ends.
const dbDownloadTimeout = 10 * time.Minute

// Retry-After of a 429 answer is honoured between minRetryAfter (no
// scanner asks again at once, whatever the answer says) and maxRetryAfter;
// when the answer gives none, the request is made again after a second.
const (
	minRetryAfter     = 100 * time.Millisecond
	maxRetryAfter     = 10 * time.Second
	defaultRetryAfter = time.Second
)

// answerTimeout bounds each request (and, for the DB's download, the wait
// for the answer to begin): a service that stops answering (a frozen or
// partitioned leader, whose connections hang) must not hold the scanner,
// which then scans itself, or asks the service's new address for the DB.
const answerTimeout = 30 * time.Second

// New returns a client with a per-request timeout.
func New(base, jobUID, tokenFile string) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = answerTimeout
	return &Client{Base: strings.TrimSuffix(base, "/"), JobUID: jobUID, TokenFile: tokenFile, HTTP: &http.Client{Timeout: answerTimeout, Transport: t}}
}

// Claim implements scan.Service.
func (c *Client) Claim(ctx context.Context, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error) {
	var out scanshare.ClaimResponse
	return out, c.post(ctx, scanshare.ClaimPath, req, &out)
}

// Share implements scan.Service.
func (c *Client) Share(ctx context.Context, req scanshare.ShareRequest) (scanshare.ShareResponse, error) {
	var out scanshare.ShareResponse
	return out, c.post(ctx, scanshare.SharePath, req, &out)
}

// DB downloads the run's DB archive into dst and checks it against its
// digest, which the scanner's pod spec names: what the service sends is
// used only if it is that archive. It reads at most the archive's size
// (DBSize, or MaxDBArchive), so that no service or man in the middle can
// fill the node's disk; the digest is checked only at the end. Once the
// answer begins, the download is bounded by ctx's deadline, or by
// dbDownloadTimeout when ctx has none.
func (c *Client) DB(ctx context.Context, digest string, dst io.Writer) (int64, error) {
	if err := scanshare.ValidateDigest(digest); err != nil {
		return 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dbDownloadTimeout)
		defer cancel()
	}
	limit := c.DBSize
	if limit <= 0 {
		limit = MaxDBArchive
	}
	req, err := c.request(ctx, http.MethodGet, scanshare.DBPath+c.JobUID+"/"+digest, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: c.HTTP.Transport}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := status(resp, scanshare.DBPath); err != nil {
		return 0, err
	}
	if resp.ContentLength > limit {
		return 0, fmt.Errorf("%w: the scan service announced %d bytes, more than the run's archive's %d", ErrWrongArchive, resp.ContentLength, limit)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return n, fmt.Errorf("downloading the DB from the scan service: %w", err)
	}
	if n > limit {
		return n, fmt.Errorf("%w: the scan service sent more than the run's archive's %d bytes", ErrWrongArchive, limit)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return n, fmt.Errorf("%w: the scan service sent a DB archive of digest %s, not the run's %s", ErrWrongArchive, got, digest)
	}
	return n, nil
}

// ErrWrongArchive: the service sent another archive than the run's.
var ErrWrongArchive = errors.New("wrong DB archive")

// FetchDB is DB into dst (emptied first), asked again while the service
// does not answer or answers 5xx, until ctx ends: a manager restarted in
// its pod keeps its address and its copy of the DB (on the pod's volume),
// and serves again once it leads. A refusal (4xx) or a wrong archive is not
// asked again. retrying, if set, hears of each failure before the wait.
func (c *Client) FetchDB(ctx context.Context, digest string, dst *os.File, retrying func(err error, wait time.Duration)) (int64, error) {
	first := c.FirstWait
	if first <= 0 {
		first = time.Second
	}
	wait := first
	for {
		if err := dst.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := dst.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		n, err := c.DB(ctx, digest, dst)
		if err == nil || !Transient(err) {
			return n, err
		}
		next := wait
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > next {
			next = se.RetryAfter
		}
		if retrying != nil {
			retrying(err, next)
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%w (asked until %w)", err, ctx.Err())
		case <-time.After(next):
		}
		wait = min(2*wait, 10*first)
	}
}

// StatusError is an answer of the service other than 200 OK.
type StatusError struct {
	Path    string
	Code    int
	Status  string
	Message string
	// RetryAfter is a 429 answer's Retry-After, bounded by maxRetryAfter
	// (defaultRetryAfter when it gives none); 0 for any other answer.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Path, e.Status, e.Message)
}

// Transient says whether a request that failed with err may pass if made
// again: the service did not answer (in time), broke off, or answered 5xx
// or 429. A refusal (4xx), a wrong archive or a cancelled request will
// not. A request's deadline is transient: whether the caller's own has
// passed is the caller's to check (FetchDB does).
func Transient(err error) bool {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	case errors.Is(err, context.Canceled), errors.Is(err, ErrWrongArchive):
		return false
	}
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the scan service token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	return req, nil
}

// base is the service's address now: ServiceFile's when it names one.
// Only the manager writes the annotation the file comes from (worker pods
// live in its namespace), and the token sent there is good for this run's
// scan service only.
func (c *Client) base() string {
	if c.ServiceFile != "" {
		if b, err := os.ReadFile(c.ServiceFile); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return strings.TrimSuffix(s, "/")
			}
		}
	}
	return c.Base
}

func status(resp *http.Response, path string) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	e := &StatusError{Path: path, Code: resp.StatusCode, Status: resp.Status, Message: strings.TrimSpace(string(msg))}
	if resp.StatusCode == http.StatusTooManyRequests {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date), bounded:
// a service must not park its scanners for long, whose runs have deadlines
// of their own.
func retryAfter(v string, now time.Time) time.Duration {
	d := defaultRetryAfter
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, minRetryAfter), maxRetryAfter)
}

// post makes a request and decodes its answer. A service that answers 429
// (it limits how often each scanner asks) is asked again after its
// Retry-After while the request's deadline allows: answerTimeout from the
// first attempt, or ctx's, whichever comes first.
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(answerTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for {
		err := c.postOnce(ctx, path, body, out)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusTooManyRequests || time.Now().Add(se.RetryAfter).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (asked until %w)", err, ctx.Err())
		case <-time.After(se.RetryAfter):
		}
	}
}

func (c *Client) postOnce(ctx context.Context, path string, body []byte, out any) error {
	req, err := c.request(ctx, http.MethodPost, path+c.JobUID, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := status(resp, path); err != nil {
		return err
	}
	// The answer is bounded like a request: a node asks for at most
	// MaxKeys verdicts at once.
	return json.NewDecoder(io.LimitReader(resp.Body, scanshare.MaxBody)).Decode(out)
}
