//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/testing/workertest"
)

// TestConcurrentWorkersShareState: two removers and "eraser node prune"
// run at once against one runtime and one state directory, as
// overlapping runs and an operator's prune do on a node. A worker that
// cannot get the state lock in time fails before removing anything; the
// others wait for each other, and the state file ends with every reading's
// update: each image first seen at the earliest reading, the images in use
// last used at the latest, and nothing protected removed.
func TestConcurrentWorkersShareState(t *testing.T) {
	onEveryRuntime(t, func(t *testing.T, n *workerNode) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		stateDir := t.TempDir()
		exclusions := workertest.ExclusionDir(t, keepExact, "example.com/protected/*")
		base := time.Now().Add(time.Hour).Truncate(time.Second)
		at := func(minutes int) string { return rfc3339(base.Add(time.Duration(minutes) * time.Minute)) }
		common := []string{"--runtime-endpoint=" + n.CRIEndpoint(), "--state-dir=" + stateDir, "--min-age=0s"}
		remover := func(now string, images ...string) func() (int, string) {
			return func() (int, string) {
				r := runWorker(t, ctx, "remover", append(common, now, "--imagelist="+imageListFile(t, images...), "--exclusion-dir="+exclusions)...)
				return r.Code, r.Stderr
			}
		}
		prune := func(now string, images ...string) func() (int, string) {
			return func() (int, string) {
				cmd := exec.CommandContext(ctx, filepath.Join(bin, "eraser"), append([]string{"node", "prune"}, append(common, now,
					"--images="+strings.Join(images, ","), "--exclude-file="+filepath.Join(exclusions, "exclude-test-list", "excluded.json"))...)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var exitErr *exec.ExitError
				if errors.As(err, &exitErr) {
					return exitErr.ExitCode(), stderr.String()
				}
				if err != nil {
					return -1, err.Error()
				}
				return 0, stderr.String()
			}
		}
		together := func(workers ...func() (int, string)) {
			t.Helper()
			var wg sync.WaitGroup
			codes, logs := make([]int, len(workers)), make([]string, len(workers))
			for i, w := range workers {
				wg.Go(func() { codes[i], logs[i] = w() })
			}
			wg.Wait()
			for i := range workers {
				if codes[i] != 0 {
					t.Fatalf("worker %d of %d: exit %d\n%s", i, len(workers), codes[i], logs[i])
				}
			}
		}

		// A holder that keeps the lock past --state-lock-wait fails the run
		// with an error naming the lock file, before any removal.
		held, err := nodestate.AcquireLock(stateDir, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := runWorker(t, ctx, "remover", append(common, at(0), "--imagelist="+imageListFile(t, "*"), "--state-lock-wait=1s")...)
		code, stderr := r.Code, r.Stderr
		if took := time.Since(start); took > time.Minute {
			t.Errorf("remover under a held lock took %s to fail, want about --state-lock-wait=1s", took)
		}
		if code == 0 || !strings.Contains(stderr, nodestate.LockPath(stateDir)) || !strings.Contains(stderr, "waited") {
			t.Errorf("remover under a held lock: exit %d, want an error naming %s\n%s", code, nodestate.LockPath(stateDir), stderr)
		}
		if !n.present(t)[junkA] {
			t.Fatal("a remover that could not lock the state removed images")
		}

		// Round 1 starts while the lock is still held: the workers read the
		// node, then queue on the lock and contend for it once it is released.
		released := make(chan error, 1)
		go func() {
			time.Sleep(2 * time.Second)
			released <- held.Release()
		}()
		together(remover(at(2), junkA, runImage), remover(at(1), junkB), prune(at(3), junkC, keepExact))
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		together(remover(at(5), junkD, exitedImage), remover(at(6), appImage), prune(at(4), keepWildcard, runImage))

		present := n.present(t)
		for _, gone := range []string{junkA, junkB, junkC, junkD, appImage, appAlias} {
			if present[gone] {
				t.Errorf("%s is still on the node", gone)
			}
		}
		for kept := range n.kept {
			if !present[kept] {
				t.Errorf("%s was removed", kept)
			}
		}

		state, err := nodestate.Load(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		ids := n.ImageIDs(t)
		first, last := base.Add(time.Minute).UTC(), base.Add(6*time.Minute).UTC()
		want, got := map[string]nodestate.Entry{}, map[string]nodestate.Entry{}
		for _, tag := range []string{keepExact, keepWildcard, runImage, exitedImage} {
			want[tag] = nodestate.Entry{FirstSeen: first}
			if tag == runImage || tag == exitedImage {
				want[tag] = nodestate.Entry{FirstSeen: first, LastUsed: last}
			}
			got[tag] = state.Get(ids[tag])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("state after concurrent workers (-want +got):\n%s", diff)
		}
		if e := state.Get(ids[n.rt.SandboxImage]); !e.FirstSeen.Equal(first) {
			t.Errorf("sandbox image first seen %v, want %v", e.FirstSeen, first)
		}
		free, err := nodestate.AcquireLock(stateDir, time.Second)
		if err != nil {
			t.Fatal(fmt.Errorf("after every worker ended: %w", err))
		}
		_ = free.Release()
	})
}
