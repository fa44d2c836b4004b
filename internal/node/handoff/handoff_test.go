package handoff

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// These tests carry no build tag: those of the transports run against every
// transport the platform offers, so the FIFO and socket transports cannot
// drift apart.

func forEachTransport(t *testing.T, f func(t *testing.T, tr Transport, dir string)) {
	for _, tr := range Available() {
		t.Run(tr.Name(), func(t *testing.T) {
			if _, ok := tr.(Socket); ok {
				skipWithoutUnixSockets(t)
			}
			// Short paths: AF_UNIX allows 107 bytes and t.TempDir is long.
			dir, err := os.MkdirTemp("", "ho")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			before := openFDs()
			f(t, tr, dir)
			checkNoLeak(t, before)
		})
	}
}

// skipWithoutUnixSockets skips under Wine, which has no AF_UNIX.
func skipWithoutUnixSockets(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" && os.Getenv("WINEPREFIX") != "" || os.Getenv("ERASER_UNDER_WINE") != "" {
		t.Skip("Wine has no AF_UNIX sockets")
	}
}

// openFDs counts this process's descriptors where the OS can tell (-1 where not).
func openFDs() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	if before < 0 {
		return
	}
	// Goroutines releasing descriptors may need a moment after cancellation.
	_ = wait.Until(10*time.Second, func() (bool, error) { return openFDs() <= before, nil })
	if after := openFDs(); after > before {
		t.Errorf("descriptors leaked: %d open before, %d after", before, after)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var sample = []Image{
	{ImageID: "sha256:" + strings.Repeat("a", 64), Names: []string{"docker.io/library/alpine:3.19"}, Digests: []string{"sha256:" + strings.Repeat("b", 64)}},
	{ImageID: "sha256:" + strings.Repeat("c", 64), Names: []string{}, Digests: []string{}},
}

func TestImagesRoundTrip(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		cases := map[string][]Image{"two images": sample, "empty list": {}}
		for name, images := range cases {
			t.Run(name, func(t *testing.T) {
				path := Path(dir, strings.ReplaceAll(name, " ", "-"))
				ctx := ctxTimeout(t, 10*time.Second)
				var got []Image
				var recvErr error
				var wg sync.WaitGroup
				wg.Go(func() { got, recvErr = tr.ReceiveImages(ctx, path) })
				if err := tr.SendImages(ctx, path, images); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				if recvErr != nil {
					t.Fatal(recvErr)
				}
				if diff := cmp.Diff(images, got); diff != "" {
					t.Errorf("(-sent +received):\n%s", diff)
				}
			})
		}
	})
}

// TestReceiverFirstAndWriterFirst: either side may start first.
func TestEitherSideFirst(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		for _, senderFirst := range []bool{true, false} {
			path := Path(dir, "x")
			ctx := ctxTimeout(t, 10*time.Second)
			errs := make(chan error, 1)
			send := func() { errs <- tr.SendImages(ctx, path, sample) }
			if senderFirst {
				go send()
				time.Sleep(100 * time.Millisecond)
			} else {
				go func() { time.Sleep(100 * time.Millisecond); send() }()
			}
			got, err := tr.ReceiveImages(ctx, path)
			if err != nil || len(got) != len(sample) {
				t.Fatalf("senderFirst=%v: %v %v", senderFirst, got, err)
			}
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(path)
		}
	})
}

func TestBadPayloads(t *testing.T) {
	cases := map[string]struct {
		data string
		want string
	}{
		"zero bytes":  {data: "", want: "no data"},
		"whitespace":  {data: " \n", want: "no data"},
		"null":        {data: "null", want: "null"},
		"not json":    {data: "complete", want: "not a JSON list"},
		"object":      {data: `{"image_id":"x"}`, want: "not a JSON list"},
		"no image id": {data: `[{"names":["a"]}]`, want: "[0]: image_id"},
		"spaced id":   {data: `[{"image_id":"` + strings.Repeat("a", 64) + `"},{"image_id":"a b"}]`, want: "[1]: image_id"},
		"wrong types": {data: `[{"image_id":1}]`, want: "not a JSON list"},
	}
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		i := 0
		for name, tc := range cases {
			i++
			t.Run(name, func(t *testing.T) {
				path := Path(dir, "p"+strings.Repeat("x", i))
				ctx := ctxTimeout(t, 10*time.Second)
				go func() { _ = tr.send(ctx, path, []byte(tc.data)) }()
				_, err := tr.ReceiveImages(ctx, path)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				if tc.data == "" && !errors.Is(err, ErrEmpty) {
					t.Errorf("zero bytes is not ErrEmpty: %v", err)
				}
			})
		}
	})
}

func TestTooLarge(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		path := Path(dir, "big")
		ctx := ctxTimeout(t, 30*time.Second)
		big := make([]byte, MaxPayload+10)
		for i := range big {
			big[i] = ' '
		}
		go func() { _ = tr.send(ctx, path, big) }()
		if _, err := tr.ReceiveImages(ctx, path); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestCompletion(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		cases := map[string]struct {
			msg  string
			want string
		}{
			"token":      {msg: CompleteToken},
			"newline":    {msg: CompleteToken + "\n"},
			"unexpected": {msg: "done", want: `unexpected message "done"`},
			"empty":      {msg: "", want: "no data"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				path := Path(dir, "c")
				c, err := tr.PublishCompletion(path)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ctx := ctxTimeout(t, 10*time.Second)
				go func() { _ = tr.send(ctx, path, []byte(tc.msg)) }()
				err = c.Wait(ctx)
				if tc.want == "" && err != nil {
					t.Fatal(err)
				}
				if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
			})
		}
		t.Run("signal", func(t *testing.T) {
			path := Path(dir, "s")
			c, err := tr.PublishCompletion(path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := ctxTimeout(t, 10*time.Second)
			errs := make(chan error, 1)
			go func() { errs <- tr.SignalCompletion(ctx, path) }()
			if err := c.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		})
	})
}

func TestSignalAbsentPeer(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		err := tr.SignalCompletion(ctxTimeout(t, 5*time.Second), Path(dir, EraseCompleteScan))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want fs.ErrNotExist", err)
		}
		if !os.IsNotExist(errors.Unwrap(err)) && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("os.IsNotExist does not hold: %v", err)
		}
	})
}

func TestCloseIdempotentAndRepublish(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		path := Path(dir, "c")
		c, err := tr.PublishCompletion(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("endpoint still there after Close: %v", err)
		}
		if err := c.Wait(ctxTimeout(t, time.Second)); err == nil {
			t.Error("Wait after Close succeeded")
		}
		again, err := tr.PublishCompletion(path)
		if err != nil {
			t.Fatalf("republish after Close: %v", err)
		}
		_ = again.Close()
	})
}

// TestCancellation: every wait ends with its context, leaving nothing open.
func TestCancellation(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr Transport, dir string) {
		cases := map[string]func(ctx context.Context) error{
			"receive, no sender": func(ctx context.Context) error {
				_, err := tr.ReceiveImages(ctx, Path(dir, "r1"))
				return err
			},
			"send, no receiver": func(ctx context.Context) error {
				return tr.SendImages(ctx, Path(dir, "s1"), sample)
			},
			"wait, no signal": func(ctx context.Context) error {
				c, err := tr.PublishCompletion(Path(dir, "w1"))
				if err != nil {
					return err
				}
				defer c.Close()
				return c.Wait(ctx)
			},
			"signal, no waiter reading": func(ctx context.Context) error {
				c, err := tr.PublishCompletion(Path(dir, "w2"))
				if err != nil {
					return err
				}
				defer c.Close()
				return tr.SignalCompletion(ctx, Path(dir, "w2"))
			},
		}
		for name, op := range cases {
			t.Run(name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := op(ctx)
				if _, ok := tr.(Socket); ok && name == "signal, no waiter reading" {
					// A socket dial succeeds once the peer listens, without an
					// Accept: the signal is buffered, unlike a FIFO's open.
					if err != nil {
						t.Fatalf("err = %v, want the buffered signal to succeed", err)
					}
					return
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want the context's deadline", err)
				}
				if waited := time.Since(start); waited > 5*time.Second {
					t.Errorf("returned %v after the deadline", waited)
				}
			})
		}
	})
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
