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

// claimOverHTTP asks the service at base for req as the scanner holding token, in
// the wire format of package scanshare: the node's client is tested
// against the service in test/integration/scanshare.
func claimOverHTTP(ctx context.Context, base, runUID, token string, req scanshare.ClaimRequest) (scanshare.ClaimResponse, error) {
	var out scanshare.ClaimResponse
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+scanshare.ClaimPath+runUID, bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return out, fmt.Errorf("claim: %s: %s", resp.Status, msg)
	}
	return out, json.NewDecoder(io.LimitReader(resp.Body, scanshare.MaxBody)).Decode(&out)
}
