//go:build linux

package e2e

// A bring-your-own scanner in the pipeline, and what a scanner may hand
// the remover.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestCustomScanner: collector, the example custom scanner (built on
// pkg/scanner) and remover as three processes over real FIFOs.
func TestCustomScanner(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		shared := workertest.SharedDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		scan := exec.CommandContext(ctx, filepath.Join(bin, "scanner"), "--shared-dir="+shared, "--flag=junk/a,app")
		var scanLog bytes.Buffer
		scan.Stderr = &scanLog
		if err := scan.Start(); err != nil {
			t.Fatal(err)
		}
		pipeline(t, ctx, n.CRIEndpoint(), shared, "", false)
		if err := scan.Wait(); err != nil {
			t.Fatalf("scanner: %v\n%s", err, scanLog.String())
		}
		present := n.present(t)
		for _, gone := range []string{junkA, appImage} {
			if present[gone] {
				t.Errorf("%s was flagged by the scanner but is still there", gone)
			}
		}
		for _, kept := range []string{junkB, junkC, junkD} {
			if !present[kept] {
				t.Errorf("%s was removed although the scanner kept it", kept)
			}
		}
	})
}

// TestHandoffCannotWiden: a scanner that hands the remover "*", a tag, or
// an image the collector did not list gets the whole hand-off refused: the
// remover exits 1 saying why, and nothing is removed.
func TestHandoffCannotWiden(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		cases := map[string]struct {
			send func(collected []handoff.Image) []handoff.Image
			want string
		}{
			"star": {send: func(c []handoff.Image) []handoff.Image { return append(c[:1:1], handoff.Image{ImageID: "*"}) },
				want: `"*" is not an image ID or digest`},
			"bare tag": {send: func([]handoff.Image) []handoff.Image { return []handoff.Image{{ImageID: "example.com/junk/a"}} },
				want: "is not an image ID or digest"},
			"not listed (in use)": {send: func(c []handoff.Image) []handoff.Image { return append(c, handoff.Image{ImageID: n.ids[runImage]}) },
				want: "is not among the"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				before := n.present(t)
				shared := workertest.SharedDir(t)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				scanErr := make(chan error, 1)
				go func() { scanErr <- playScanner(ctx, shared, tc.send) }()
				collector, remover := pipelineRun(t, ctx, n.CRIEndpoint(), shared, "", false)
				if err := <-scanErr; err != nil {
					t.Errorf("scanner: %v", err)
				}
				if remover.Code != 1 || !strings.Contains(remover.Summary.Error, tc.want) || !strings.Contains(remover.Summary.Error, "nothing removed") {
					t.Errorf("remover exit %d, error %q; want 1 and %q\n%s", remover.Code, remover.Summary.Error, tc.want, remover.Stderr)
				}
				if collector.Code != 0 {
					t.Errorf("collector exit %d: it must still be told the remover finished\n%s", collector.Code, collector.Stderr)
				}
				if diff := cmp.Diff(before, n.present(t)); diff != "" {
					t.Errorf("images changed (-before +after):\n%s", diff)
				}
			})
		}
	})
}

// playScanner is a scanner built on the hand-off API: it sends the remover
// what choose makes of the collector's images, then waits for completion.
func playScanner(ctx context.Context, shared string, choose func([]handoff.Image) []handoff.Image) error {
	tr := handoff.FIFO{}
	done, err := tr.PublishCompletion(handoff.Path(shared, handoff.EraseCompleteScan))
	if err != nil {
		return err
	}
	defer done.Close()
	if err := scanPass(ctx, tr, shared, choose); err != nil {
		return err
	}
	return done.Wait(ctx)
}

// scanPass is a scanner's pass alone: it sends the remover what choose
// makes of the collector's images.
func scanPass(ctx context.Context, tr handoff.FIFO, shared string, choose func([]handoff.Image) []handoff.Image) error {
	images, err := tr.ReceiveImages(ctx, handoff.Path(shared, handoff.CollectScan))
	if err != nil {
		return err
	}
	return tr.SendImages(ctx, handoff.Path(shared, handoff.ScanErase), choose(images))
}

// only is a scanner's choice of the images keep says are vulnerable.
func only(keep func(handoff.Image) bool) func([]handoff.Image) []handoff.Image {
	return func(images []handoff.Image) []handoff.Image {
		var chosen []handoff.Image
		for _, img := range images {
			if keep(img) {
				chosen = append(chosen, img)
			}
		}
		return chosen
	}
}

// TestHandoffLinkNotFollowed: a scanner that replaces its completion
// endpoint with a link to a file the remover may write (here a stand-in
// for CRI-O's layers.json, which a remover reclaiming CRI-O's leftovers
// may write) gets nothing written: the remover refuses the link, says why,
// and the file is byte for byte as it was.
func TestHandoffLinkNotFollowed(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		before := n.present(t)
		store := filepath.Join(t.TempDir(), "layers.json")
		content := []byte(`[{"id":"` + strings.Repeat("a", 64) + `","created":"2026-12-01T00:00:00Z"}]`)
		if err := os.WriteFile(store, content, 0o600); err != nil {
			t.Fatal(err)
		}
		shared := workertest.SharedDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The scanner publishes its endpoint as the protocol says, takes the
		// collector's list, then puts the link in its endpoint's place
		// before it sends its own list (the remover signals only after it
		// has that list), and leaves the link there.
		scanErr := make(chan error, 1)
		go func() {
			tr := handoff.FIFO{}
			endpoint := handoff.Path(shared, handoff.EraseCompleteScan)
			if _, err := tr.PublishCompletion(endpoint); err != nil {
				scanErr <- err
				return
			}
			if _, err := tr.ReceiveImages(ctx, handoff.Path(shared, handoff.CollectScan)); err != nil {
				scanErr <- err
				return
			}
			if err := os.Remove(endpoint); err != nil {
				scanErr <- err
				return
			}
			if err := os.Symlink(store, endpoint); err != nil {
				scanErr <- err
				return
			}
			scanErr <- tr.SendImages(ctx, handoff.Path(shared, handoff.ScanErase), []handoff.Image{})
		}()
		collector, remover := pipelineRun(t, ctx, n.CRIEndpoint(), shared, "", false)
		if err := <-scanErr; err != nil {
			t.Fatalf("scanner: %v", err)
		}
		got, err := os.ReadFile(store)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content) {
			t.Errorf("the file behind the link was written: %q, was %q", got, content)
		}
		for _, want := range []string{"could not tell the scanner that removal finished", "symbolic link", "never followed", "not a hand-off endpoint"} {
			if !strings.Contains(remover.Stderr, want) {
				t.Errorf("the remover's log does not say %q\n%s", want, remover.Stderr)
			}
		}
		if remover.Code != 0 || collector.Code != 0 {
			t.Errorf("remover exit %d, collector exit %d: the scanner's list was valid (empty) and the collector's endpoint untouched\ncollector:\n%s\nremover:\n%s",
				remover.Code, collector.Code, collector.Stderr, remover.Stderr)
		}
		if diff := cmp.Diff(before, n.present(t)); diff != "" {
			t.Errorf("images changed (-before +after):\n%s", diff)
		}
	})
}
