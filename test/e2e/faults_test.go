//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestHandoffTimeout: a remover whose peer never sends gives up after
// --handoff-timeout, naming the peer it waited for, and exits 1; so does a
// collector whose images nobody takes.
func TestHandoffTimeout(t *testing.T) {
	cases := map[string]struct {
		worker  string
		scanner bool
		want    string
	}{
		"remover, no scanner": {worker: "remover", want: "no images from the collector"},
		// Told that a scanner runs, the remover waits for the scanner alone,
		// though no scanner endpoint exists: a scanner that never sends
		// removes nothing.
		"remover, scanner enabled": {worker: "remover", scanner: true, want: "no images from the scanner"},
		"collector":                {worker: "collector", want: "nobody took the images"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			shared := workertest.SharedDir(t)
			args := []string{"--shared-dir=" + shared, "--handoff-timeout=1s"}
			if tc.worker == "remover" {
				args = append(args, "--scanner="+map[bool]string{true: "enabled", false: "disabled"}[tc.scanner])
			}
			if tc.worker == "collector" {
				n := seed(t)
				args = append(args, "--runtime-endpoint="+n.Endpoint)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			r := runWorker(t, ctx, tc.worker, args...)
			if r.Code != 1 || !strings.Contains(r.Summary.Error, tc.want) || !strings.Contains(r.Summary.Error, "--handoff-timeout") {
				t.Errorf("exit %d, error %q; want 1 and %q\n%s", r.Code, r.Summary.Error, tc.want, r.Stderr)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// TestRuntimeSocketRemoved: the runtime's socket disappears (the runtime
// went away, or the mount is wrong): a clear error, exit 1, nothing removed.
func TestRuntimeSocketRemoved(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		socket := strings.TrimPrefix(n.CRIEndpoint(), "unix://")
		before := n.present(t)
		if err := os.Remove(socket); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := runWorker(t, ctx, "remover", "--imagelist="+imageListFile(t, "*"), "--runtime-endpoint="+n.CRIEndpoint())
		if r.Code != 1 || !strings.Contains(r.Summary.Error, "runtime socket "+socket) || !strings.Contains(r.Summary.Error, "no such file") {
			t.Errorf("exit %d, error %q\n%s", r.Code, r.Summary.Error, r.Stderr)
		}
		if diff := cmp.Diff(before, n.present(t)); diff != "" {
			t.Errorf("images changed (-before +after):\n%s", diff)
		}
	})
}

// TestHandoffPeerFaults: a scanner process that dies after writing part of
// its list, and two scanners writing to the same endpoint at once. The
// remover refuses what it got (it is not one valid list of collected
// images), removes nothing, and neither side hangs.
func TestHandoffPeerFaults(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		before := n.present(t)
		collected := []handoff.Image{{ImageID: n.ids[junkA]}, {ImageID: n.ids[junkB]}}
		listA, _ := handoff.Encode(collected[:1])
		listB, _ := handoff.Encode(collected[1:])
		// Each writer holds the FIFO open before writing, so both are connected
		// when the remover reads: their bytes reach it together.
		const writer = `exec 3>"$1"; sleep 0.5; printf '%s' "$2" >&3; `
		cases := map[string][]string{
			"dies mid-write": {writer + `kill -KILL $$`, string(listA[:len(listA)/2])},
			"two writers":    {writer + `exec 3>&-`, string(listA), string(listB)},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				shared := workertest.SharedDir(t)
				if err := handoff.WriteCollected(shared, collected); err != nil {
					t.Fatal(err)
				}
				fifo := handoff.Path(shared, handoff.ScanErase)
				if err := exec.Command("mkfifo", fifo).Run(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var writers []*exec.Cmd
				for _, payload := range tc[1:] {
					w := exec.CommandContext(ctx, "sh", "-c", tc[0], "scanner", fifo, payload)
					if err := w.Start(); err != nil {
						t.Fatal(err)
					}
					writers = append(writers, w)
				}
				r := runWorker(t, ctx, "remover", "--shared-dir="+shared, "--runtime-endpoint="+n.CRIEndpoint(), "--handoff-timeout=20s", "--scanner=enabled")
				for _, w := range writers {
					_ = w.Wait()
				}
				if ctx.Err() != nil {
					t.Fatal("a side hung")
				}
				if r.Code != 1 || !strings.Contains(r.Summary.Error, "nothing removed") || !strings.Contains(r.Summary.Error, "not a JSON list") {
					t.Errorf("exit %d, error %q; want 1, refused as not a JSON list\n%s", r.Code, r.Summary.Error, r.Stderr)
				}
				if diff := cmp.Diff(before, n.present(t)); diff != "" {
					t.Errorf("images changed (-before +after):\n%s", diff)
				}
			})
		}
	})
}
