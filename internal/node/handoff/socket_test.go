package handoff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSocketPathLimit: a path over sun_path's bound is refused by every
// operation, naming the bound; one at the bound is taken.
func TestSocketPathLimit(t *testing.T) {
	skipWithoutUnixSockets(t)
	dir, err := os.MkdirTemp("", "ho")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	pathOf := func(n int) string {
		p := filepath.Join(dir, "s")
		return p + strings.Repeat("x", n-len(p))
	}
	ok, tooLong := pathOf(MaxSocketPath), pathOf(MaxSocketPath+1)
	c, err := Socket{}.PublishCompletion(ok)
	if err != nil {
		t.Fatalf("%d-byte path refused: %v", len(ok), err)
	}
	_ = c.Close()
	ctx := ctxTimeout(t, time.Second)
	for name, op := range map[string]func() error{
		"publish": func() error { _, err := Socket{}.PublishCompletion(tooLong); return err },
		"receive": func() error { _, err := Socket{}.ReceiveImages(ctx, tooLong); return err },
		"send":    func() error { return Socket{}.SendImages(ctx, tooLong, sample) },
		"signal":  func() error { return Socket{}.SignalCompletion(ctx, tooLong) },
	} {
		if err := op(); err == nil || !strings.Contains(err.Error(), "AF_UNIX allows at most 107") {
			t.Errorf("%s with a %d-byte path: %v", name, len(tooLong), err)
		}
	}
}
