package handoff

// The hand-off's edges, on every transport the platform offers: the
// socket path limit, payloads refused, an endpoint removed while a side
// waits, two writers.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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

// TestDecodeRejectsRepeatedKeys: Go's decoder would read only the last of
// two equal (or re-cased) keys of an image, so the image handed on would not
// be the one the payload names first.
func TestDecodeRejectsRepeatedKeys(t *testing.T) {
	a, b := `"sha256:`+strings.Repeat("a", 64)+`"`, `"sha256:`+strings.Repeat("b", 64)+`"`
	cases := map[string]struct {
		data, want string
	}{
		"repeated image_id": {data: `[{"image_id":` + a + `,"image_id":` + b + `}]`, want: `hand-off payload: $[0]: key "image_id" appears twice; only the last would be read`},
		"re-cased names":    {data: `[{"image_id":` + a + `,"names":["x"],"Names":[]}]`, want: `hand-off payload: $[0]: keys "names" and "Names" differ only in case; only the last would be read`},
		"re-cased alone":    {data: `[{"Image_ID":` + a + `}]`, want: `hand-off payload: $[0]: key "Image_ID": the key is "image_id" (keys are case-sensitive here)`},
		"well formed":       {data: `[{"image_id":` + a + `,"names":["x"],"digests":[]},{"image_id":` + b + `}]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if _, err := Decode([]byte(tc.data)); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeRejectsNonIDs: an image_id is an image ID or a digest; "*" or a
// tag would widen a removal beyond the images the collector listed.
func TestDecodeRejectsNonIDs(t *testing.T) {
	cases := map[string]string{
		"star":      `[{"image_id":"*"}]`,
		"tag":       `[{"image_id":"alpine"}]`,
		"full tag":  `[{"image_id":"docker.io/library/alpine:3.19"}]`,
		"short hex": `[{"image_id":"sha256:abc"}]`,
		"upper hex": `[{"image_id":"sha256:` + strings.Repeat("A", 64) + `"}]`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(data)); err == nil || !strings.Contains(err.Error(), "not an image ID or digest") {
				t.Errorf("err = %v", err)
			}
		})
	}
	ok := `[{"image_id":"sha256:` + strings.Repeat("a", 64) + `"},{"image_id":"` + strings.Repeat("b", 64) + `"}]`
	if _, err := Decode([]byte(ok)); err != nil {
		t.Errorf("IDs refused: %v", err)
	}
}

// TestEndpointRemovedWhileWaiting: an endpoint removed (a container
// restarted, the shared directory cleaned) while a side waits in it, then
// the wait cancelled: no goroutine or descriptor outlives the call.
func TestEndpointRemovedWhileWaiting(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		cases := map[string]struct {
			path string
			op   func(ctx context.Context, path string) error
		}{
			// The side that creates the payload endpoint: a FIFO's writer, a
			// socket's listener.
			"payload": {path: Path(dir, "gone-payload"), op: func(ctx context.Context, path string) error {
				if _, socket := tr.(Socket); socket {
					_, err := tr.ReceiveImages(ctx, path)
					return err
				}
				return tr.SendImages(ctx, path, sample)
			}},
			"wait": {path: Path(dir, "gone-wait"), op: func(ctx context.Context, path string) error {
				c, err := tr.PublishCompletion(path)
				if err != nil {
					return err
				}
				defer c.Close()
				return c.Wait(ctx)
			}},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				goroutines, fds := runtime.NumGoroutine(), openFDs()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- tc.op(ctx, tc.path) }()
				deadline := time.Now().Add(5 * time.Second)
				for _, err := os.Lstat(tc.path); err != nil; _, err = os.Lstat(tc.path) {
					if time.Now().After(deadline) {
						t.Fatalf("the endpoint never appeared: %v", err)
					}
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(50 * time.Millisecond) // into the wait
				if err := os.Remove(tc.path); err != nil {
					t.Fatal(err)
				}
				cancel()
				select {
				case err := <-done:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("err = %v, want cancellation", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the wait did not end with its context")
				}
				for end := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(end); {
					time.Sleep(10 * time.Millisecond)
				}
				if n := runtime.NumGoroutine(); n > goroutines {
					t.Errorf("%d goroutines before, %d after", goroutines, n)
				}
				checkNoLeak(t, fds)
			})
		}
	})
}

// TestTwoWriters: two senders on one endpoint never make one list of two
// (which could widen what is removed) and never hang: the receiver gets
// exactly one sender's list, or an error.
func TestTwoWriters(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		path := Path(dir, "two")
		one, two := sample[:1], sample[1:]
		ctx := ctxTimeout(t, 5*time.Second)
		sent := make(chan error, 2)
		for _, list := range [][]Image{one, two} {
			go func() { sent <- tr.SendImages(ctx, path, list) }()
		}
		got, err := tr.ReceiveImages(ctx, path)
		if err == nil && !reflect.DeepEqual(got, one) && !reflect.DeepEqual(got, two) {
			t.Errorf("received %+v: neither sender's list", got)
		}
		// The second sender finds no reader: it must end with its context,
		// or report its data delivered to a listener that was there.
		for range 2 {
			select {
			case <-sent:
			case <-time.After(10 * time.Second):
				t.Fatal("a sender hung past its context")
			}
		}
	})
}
