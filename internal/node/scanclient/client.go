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
}

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
// used only if it is that archive. Once the answer begins, the download has
// no deadline of its own beyond ctx (tens of megabytes over the cluster's
// network).
func (c *Client) DB(ctx context.Context, digest string, dst io.Writer) (int64, error) {
	if err := scanshare.ValidateDigest(digest); err != nil {
		return 0, err
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
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), resp.Body)
	if err != nil {
		return n, fmt.Errorf("downloading the DB from the scan service: %w", err)
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
		if retrying != nil {
			retrying(err, wait)
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("%w (asked until %w)", err, ctx.Err())
		case <-time.After(wait):
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
	return &StatusError{Path: path, Code: resp.StatusCode, Status: resp.Status, Message: strings.TrimSpace(string(msg))}
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
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
