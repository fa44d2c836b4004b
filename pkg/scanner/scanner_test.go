package scanner

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/handoff"
)

// TestProviderProtocol plays the collector and the remover around a
// provider: images in, the non-compliant (and, by choice, failed) ones out,
// and an unexpected completion message is an error.
func TestProviderProtocol(t *testing.T) {
	if runtime.GOOS == "windows" && os.Getenv("WINEPREFIX") != "" {
		t.Skip("Wine has no AF_UNIX sockets")
	}
	cases := map[string]struct {
		deleteFailed bool
		completion   string
		wantSent     int
		wantErr      string
	}{
		"failed kept":       {completion: handoff.CompleteToken, wantSent: 1},
		"failed removed":    {deleteFailed: true, completion: handoff.CompleteToken, wantSent: 2},
		"unexpected finish": {completion: "done", wantSent: 1, wantErr: `unexpected message "done"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "scan")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tr := handoff.Default()
			p, err := NewImageProvider(WithContext(ctx), WithSharedDir(dir), WithDeleteScanFailedImages(tc.deleteFailed))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			images := []Image{{ImageID: "sha256:" + strings.Repeat("a", 64)}, {ImageID: "sha256:" + strings.Repeat("b", 64)}}
			go func() { _ = tr.SendImages(ctx, handoff.Path(dir, handoff.CollectScan), images) }()
			got, err := p.ReceiveImages()
			if err != nil || len(got) != 2 {
				t.Fatalf("received %v, %v", got, err)
			}
			sent := make(chan []Image, 1)
			go func() {
				imgs, _ := tr.ReceiveImages(ctx, handoff.Path(dir, handoff.ScanErase))
				sent <- imgs
			}()
			if err := p.SendImages(got[:1], got[1:]); err != nil {
				t.Fatal(err)
			}
			if n := len(<-sent); n != tc.wantSent {
				t.Errorf("sent %d images, want %d", n, tc.wantSent)
			}
			go func() {
				// The remover's signal, or something else.
				_ = sendRaw(ctx, tr, handoff.Path(dir, handoff.EraseCompleteScan), tc.completion)
			}()
			err = p.Finish()
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Finish: %v, want %q", err, tc.wantErr)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close after Finish: %v", err)
			}
		})
	}
}

// sendRaw plays a peer that writes msg where the remover's signal goes, as
// the wire carries it: into the FIFO, or over the socket.
func sendRaw(ctx context.Context, tr handoff.Transport, path, msg string) error {
	if msg == handoff.CompleteToken {
		return tr.SignalCompletion(ctx, path)
	}
	if tr.Name() == "fifo" {
		// Opening a FIFO for writing waits for its reader, the provider.
		return os.WriteFile(path, []byte(msg), 0)
	}
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			_, err = conn.Write([]byte(msg))
			return errors.Join(err, conn.Close())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
