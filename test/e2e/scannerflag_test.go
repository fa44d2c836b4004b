//go:build linux

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestScannerEndpointRemovedEarly: a custom scanner that removes its
// completion endpoint before the remover starts (upstream's protocol does
// not say when it must go) still has only the images it listed removed. The
// remover is told by --scanner that a scanner runs; before, it took the
// endpoint's absence for "no scanner" and swept every candidate.
func TestScannerEndpointRemovedEarly(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		shared := workertest.SharedDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		fifo := handoff.FIFO{}
		done, err := fifo.PublishCompletion(handoff.Path(shared, handoff.EraseCompleteScan))
		if err != nil {
			t.Fatal(err)
		}
		if err := done.Close(); err != nil {
			t.Fatal(err)
		}
		scanErr := make(chan error, 1)
		go func() {
			scanErr <- scanPass(ctx, fifo, shared, only(func(img handoff.Image) bool {
				return img.ImageID == n.ids[junkA] || img.ImageID == n.ids[appImage]
			}))
		}()
		_, remover := pipeline(t, ctx, n.CRIEndpoint(), shared, "", false)
		if err := <-scanErr; err != nil {
			t.Fatalf("scanner: %v", err)
		}
		if got := remover.Summary.Counts["removed"]; got != 2 {
			t.Errorf("remover counts %v, want the 2 images the scanner listed removed", remover.Summary.Counts)
		}
		// Every image but the two it listed, and the alias of one of them.
		want := map[string]bool{junkB: true, junkC: true, junkD: true, shortImage: true}
		for image := range n.kept {
			want[image] = true
		}
		if diff := cmp.Diff(want, n.present(t)); diff != "" {
			t.Errorf("images left (-want +got):\n%s", diff)
		}
	})
}
