package handoff

// An endpoint's edges, on every transport the platform offers: removed
// while a side waits, two writers.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/testing/wait"
)

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
				wait.For(t, 30*time.Second, "the endpoint to appear", func() bool {
					_, err := os.Lstat(tc.path)
					return err == nil
				})
				time.Sleep(50 * time.Millisecond) // into the wait
				if err := os.Remove(tc.path); err != nil {
					t.Fatal(err)
				}
				cancel()
				select {
				case err := <-done:
					// The side still waiting ends with its context; a writer
					// whose next look finds the endpoint gone ends there.
					if !errors.Is(err, context.Canceled) && !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("err = %v, want cancellation or the endpoint gone", err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the wait did not end with its context")
				}
				_ = wait.Until(10*time.Second, func() (bool, error) { return runtime.NumGoroutine() <= goroutines, nil })
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
