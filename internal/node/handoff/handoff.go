// Package handoff passes image lists between the containers of a worker pod
// (collector → scanner → remover) and tells the earlier stages that the
// remover has finished, through a shared directory.
//
// The protocol is upstream Eraser's, so custom scanners written for it keep
// working: endpoints collectScan, scanErase, eraseCompleteCollect and
// eraseCompleteScan; payload a JSON array of {"image_id","names","digests"};
// completion token "complete". On Linux the endpoints are FIFOs; Windows has
// none, so there they are AF_UNIX sockets. Both transports sit behind one
// interface and both run on Linux, so they are tested alike.
//
// What the remover accepts: every image_id in a payload must be an image ID
// or digest (Decode refuses "*", tags and short IDs), and the remover takes
// from the hand-off only images the collector listed. Before it sends, the
// collector writes the list it sends to Collected in the shared directory,
// atomically (a temporary file renamed into place), so the record exists
// whole before any peer can act on the payload. The remover reads it after
// receiving and rejects the whole hand-off, removing nothing, when an entry
// is not the ID, or a digest, of an image in the record. A scanner can only
// narrow what the collector found, never widen it; "*" selects every unused
// image only in an ImageList (the remover's --imagelist).
//
// Rules both transports keep (from the review of upstream's Windows port):
// a waiter publishes its completion endpoint before the payload that leads to
// the signal is sent; every descriptor is closed on every path; every wait
// ends when its context does; an empty payload is an error, never "nothing to
// do"; Close is idempotent and removes only what this side created.
package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/eraser-oss/eraser/internal/util/strictkeys"
)

// Endpoint names in the shared directory, as upstream Eraser names them.
const (
	CollectScan          = "collectScan"
	ScanErase            = "scanErase"
	EraseCompleteCollect = "eraseCompleteCollect"
	EraseCompleteScan    = "eraseCompleteScan"
)

// Collected is the collector's record, in the shared directory, of the
// images it handed on: what the remover will accept back (see ReadCollected).
const Collected = "collected.json"

// CompleteToken is what the remover sends to say it has finished.
const CompleteToken = "complete"

// MaxPayload bounds an image list: about 200,000 images.
const MaxPayload = 64 << 20

// maxCompletion bounds a completion message.
const maxCompletion = 1 << 10

// ErrEmpty is a hand-off that carried no bytes at all: the peer died or
// closed early. An empty list is "[]".
var ErrEmpty = errors.New("hand-off carried no data (peer closed without sending)")

// Image is one image in a hand-off payload.
type Image struct {
	ImageID string   `json:"image_id"`
	Names   []string `json:"names"`
	Digests []string `json:"digests"`
}

// Transport is one way of moving hand-offs between containers.
type Transport interface {
	// Name says which transport this is, for logs.
	Name() string
	// SendImages gives images to the peer that receives on path, waiting
	// until it takes them or ctx ends.
	SendImages(ctx context.Context, path string, images []Image) error
	// ReceiveImages waits for a peer to send on path and returns what it sent.
	ReceiveImages(ctx context.Context, path string) ([]Image, error)
	// PublishCompletion creates the completion endpoint at path. Publish it
	// before sending the payload whose processing ends in the signal.
	PublishCompletion(path string) (Completion, error)
	// SignalCompletion tells the waiter at path that the work is done. If
	// nobody published that endpoint the error matches fs.ErrNotExist.
	SignalCompletion(ctx context.Context, path string) error

	// send writes raw bytes as a payload; tests use it to send bad input.
	send(ctx context.Context, path string, data []byte) error
}

// Completion is a published completion endpoint.
type Completion interface {
	// Wait blocks until the peer signals; an unexpected message is an error.
	Wait(ctx context.Context) error
	// Close removes the endpoint; calling it again is harmless.
	Close() error
}

// Path joins the shared directory and an endpoint name.
func Path(dir, name string) string { return filepath.Join(dir, name) }

// Encode is the wire form of an image list.
func Encode(images []Image) ([]byte, error) {
	if images == nil {
		images = []Image{}
	}
	return json.Marshal(images)
}

// Decode reads and validates a payload.
func Decode(data []byte) ([]Image, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmpty
	}
	// A repeated or re-cased key would leave only its last value: an image
	// named twice, or another image's names, would be read.
	if err := strictkeys.JSON(data, "image_id", "names", "digests"); err != nil {
		return nil, fmt.Errorf("hand-off payload: %w", err)
	}
	var images []Image
	if err := json.Unmarshal(data, &images); err != nil {
		return nil, fmt.Errorf("hand-off payload is not a JSON list of images: %w", err)
	}
	if images == nil {
		return nil, errors.New(`hand-off payload is null; an empty list is "[]"`)
	}
	for i, img := range images {
		if _, ok := NormalID(img.ImageID); !ok {
			return nil, fmt.Errorf("hand-off payload [%d]: image_id %q is not an image ID or digest (sha256:<64 lowercase hex>)", i, img.ImageID)
		}
	}
	return images, nil
}

// NormalID is an image ID or digest in its "sha256:<hex>" form; ok is false
// for anything else ("*", a tag, a short ID). Runtimes report IDs with the
// prefix (containerd) or without (CRI-O).
func NormalID(s string) (string, bool) {
	hex := strings.TrimPrefix(s, "sha256:")
	if len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", false
	}
	return "sha256:" + hex, true
}

// readAll reads at most limit bytes; more is an error.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("hand-off larger than %d bytes", limit)
	}
	return data, nil
}

func checkToken(data []byte) error {
	got := strings.TrimSpace(string(data))
	switch got {
	case CompleteToken:
		return nil
	case "":
		return fmt.Errorf("completion: %w", ErrEmpty)
	}
	if len(got) > 64 {
		got = got[:64] + "..."
	}
	return fmt.Errorf("completion: unexpected message %q, want %q", got, CompleteToken)
}

// closeWith closes c and returns err, or the close error if err is nil: a
// failed close after a successful operation still counts.
func closeWith(c io.Closer, err error) error {
	if cerr := c.Close(); err == nil {
		return cerr
	}
	return err
}

// ctxErr prefers the context's error when it ended a failed operation.
func ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}
