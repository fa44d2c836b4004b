package handoff

import "context"

// SendRawForTest writes arbitrary bytes to an endpoint, for other packages'
// tests of how a peer handles bad input.
func SendRawForTest(ctx context.Context, t Transport, path string, data []byte) error {
	return t.send(ctx, path, data)
}
