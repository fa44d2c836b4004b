package scanservice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// wireClient asks the service at base as the scanner holding token, for
// the run whose job UID is run, in the wire format of package scanshare: the node's own
// client is tested against the service in test/integration/scanshare.
type wireClient struct {
	base, run, token string
}

func (c *wireClient) Claim(ctx context.Context, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error) {
	var out scanshare.ClaimResponse
	return out, c.post(ctx, scanshare.ClaimPath, req, &out)
}

func (c *wireClient) Share(ctx context.Context, req scanshare.ShareRequest) (scanshare.ShareResponse, error) {
	var out scanshare.ShareResponse
	return out, c.post(ctx, scanshare.SharePath, req, &out)
}

func (c *wireClient) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path+c.run, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, msg)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, scanshare.MaxBody)).Decode(out)
}
