//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/testing/noderuntime"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// TestFreedMatchesMeasured: three images are removed, two sharing a base
// layer and one sharing its base with an image that stays. The bytes the
// run expects to free (from the runtime's records) count the first base
// once and the second not at all, and agree within 5% with what the
// image filesystem (a tmpfs) gained; where the worker cannot see the
// filesystem, with what the runtime's records shrank by.
func TestFreedMatchesMeasured(t *testing.T) {
	const mib = 1 << 20
	noderuntime.EachNode(t, noderuntime.Options{SmallDiskMiB: 160}, func(t *testing.T, rt noderuntime.Runtime, n noderuntime.Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared := map[string][]byte{"base.bin": randomBytes(12 * mib)}
		keptBase := map[string][]byte{"kept-base.bin": randomBytes(9 * mib)}
		images := []testimage.Image{
			{Tags: []string{"example.com/freed/a:1"}, Base: shared, Files: map[string][]byte{"a.bin": randomBytes(8 * mib)}},
			{Tags: []string{"example.com/freed/b:1"}, Base: shared, Files: map[string][]byte{"b.bin": randomBytes(10 * mib)}},
			{Tags: []string{"example.com/freed/c:1"}, Base: keptBase, Files: map[string][]byte{"c.bin": randomBytes(4 * mib)}},
			{Tags: []string{"example.com/freed/kept:1"}, Base: keptBase, Files: map[string][]byte{"kept.bin": randomBytes(2 * mib)}},
		}
		// What only a, b and c hold, once per copy the store keeps
		// (containerd: the compressed blob and the snapshot; random bytes
		// do not compress).
		own := uint64((12 + 8 + 10 + 4) * mib * rt.LayerCopies)
		type mode struct {
			name string
			args []string
			by   string
		}
		modes := []mode{{"on the image filesystem", []string{"--imagefs-path=" + n.RootDir()}, remover.MeasuredByImageFs}}
		if rt.Name == "containerd" {
			// A CRI-O node's worker always sees the image store it reads.
			modes = append(modes, mode{"in the runtime's records", nil, remover.MeasuredByRuntime})
		}
		for _, how := range modes {
			t.Run(how.name, func(t *testing.T) {
				n.Import(t, images...)
				args := append([]string{"--runtime-endpoint=" + n.CRIEndpoint(), "--imagelist=" + imageListFile(t, "example.com/freed/a:1", "example.com/freed/b:1", "example.com/freed/c:1")}, how.args...)
				r := runWorker(t, ctx, "remover", append(args, rt.WorkerArgs(n)...)...)
				if r.Code != 0 || r.Summary.Counts["removed"] != 3 {
					t.Fatalf("exit %d, summary %+v\n%s", r.Code, r.Summary, r.Stderr)
				}
				f := r.Summary.Freed
				if f == nil {
					t.Fatalf("no freed bytes in the summary %+v\n%s", r.Summary, r.Stderr)
				}
				t.Logf("expected %d bytes, measured %d (%s), images' sizes %d; note %q", f.ExpectedBytes, f.MeasuredBytes, f.MeasuredBy, r.Summary.BytesFreed, f.Note)
				checkFreed(t, f, own, how.by)
				if _, ok := n.ImageIDs(t)["example.com/freed/kept:1"]; !ok {
					t.Error("the image sharing c's base was removed")
				}
			})
		}
	})
}

// checkFreed: the expected bytes are own within 10% (metadata and the
// filesystem's blocks aside), the measured within 5% of the expected.
func checkFreed(t *testing.T, f *workerresult.Freed, own uint64, by string) {
	t.Helper()
	if f.Error != "" {
		t.Errorf("not measured: %s", f.Error)
	}
	if float64(f.ExpectedBytes) < 0.95*float64(own) || float64(f.ExpectedBytes) > 1.1*float64(own) {
		t.Errorf("expected %d bytes freed, want about %d (each layer only the removed images hold, once)", f.ExpectedBytes, own)
	}
	if f.MeasuredBy != by {
		t.Errorf("measured by %q, want %q", f.MeasuredBy, by)
	}
	if d := float64(f.MeasuredBytes) - float64(f.ExpectedBytes); d > 0.05*float64(f.ExpectedBytes) || -d > 0.05*float64(f.ExpectedBytes) {
		t.Errorf("measured %d bytes freed, expected %d: more than 5%% apart (note %q)", f.MeasuredBytes, f.ExpectedBytes, f.Note)
	}
}
