// Package scanclient is a scanner's side of the manager's scan service: it
// claims and shares verdicts over HTTP, presenting the ServiceAccount token
// the kubelet projects into the scanner's container for the run.
package scanclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Client talks to the scan service of one run.
type Client struct {
	// Base is the service's address, http://host:port.
	Base string
	// JobUID is the run's job UID, which the paths and the token's
	// audience name.
	JobUID string
	// TokenFile is the projected token, read on each request: the kubelet
	// renews it in place.
	TokenFile string
	HTTP      *http.Client
}

// New returns a client with a per-request timeout: a service that stops
// answering must not hold the scanner, which then scans itself.
func New(base, jobUID, tokenFile string) *Client {
	return &Client{Base: strings.TrimSuffix(base, "/"), JobUID: jobUID, TokenFile: tokenFile, HTTP: &http.Client{Timeout: 30 * time.Second}}
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

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	token, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return fmt.Errorf("reading the scan service token: %w", err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Base+path+c.JobUID, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	// The answer is bounded like a request: a node asks for at most
	// MaxKeys verdicts at once.
	return json.NewDecoder(io.LimitReader(resp.Body, scanshare.MaxBody)).Decode(out)
}
