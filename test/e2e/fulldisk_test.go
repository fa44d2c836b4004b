//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// fill writes to dir until its filesystem has no room left, and returns
// the file it wrote.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// TestFullDiskRemovesFirst: the node's state and its images on one full
// disk (a tmpfs with no byte left). A scheduled run removes the unused
// images first and saves the node's state after, once the removals freed
// room; before, the collector's save failed and nothing was removed.
func TestFullDiskRemovesFirst(t *testing.T) {
	n := &node{Containerd: testcontainerd.Start(t, testcontainerd.WithSmallDisk(48))}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var tags []string
	for i := range 4 {
		tag := fmt.Sprintf("example.com/full/%d:1", i)
		tags = append(tags, tag)
		n.Import(t, testimage.Image{Tags: []string{tag}, RandomBytes: 4 << 20})
	}
	stateDir := filepath.Join(n.RootDir(), "eraser-state")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A node's kubelet asks the runtime's status every few seconds from its
	// start, long before the disk fills: containerd 2.x writes its
	// introspection UUID at the first such call, which a full disk refuses.
	if _, err := n.Runtime.Status(ctx, &runtimeapi.StatusRequest{}); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, n.RootDir())
	if err := os.WriteFile(filepath.Join(stateDir, "probe"), []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the disk is not full: writing a byte gave %v", err)
	}

	// Both workers exit 0: the removals freed the room the state needs.
	col, _ := scheduled(t, ctx, n.Endpoint, []string{"--state-dir=" + stateDir, "--min-age=0s"})
	present := n.present(t)
	for _, tag := range tags {
		if present[tag] {
			t.Errorf("%s is still on the node: the full disk stopped its removal", tag)
		}
	}
	// The collector runs on the full disk and says so, unless the runtime
	// freed room between the fill and the collector's save (containerd 1.7
	// collects an import's leftovers in the background, at a time of its
	// own): then the disk was not full for it, and what this test proves,
	// the removals before the save, holds all the same. Whether the
	// remover meets a full disk depends on the runtime too (containerd 1.6
	// frees a removed image's content after the remover's state write, 1.7
	// and 2.x before it); the remover's own report of a full disk is the
	// case below.
	if !strings.Contains(col.Stderr, "disk") {
		t.Logf("the collector did not meet a full disk (the runtime freed room first):\n%s", col.Stderr)
	}
	st, err := nodestate.Load(stateDir)
	if err != nil {
		t.Fatalf("the node's state after the run: %v", err)
	}
	if st.Len() == 0 {
		t.Error("the node's state was not saved after the removals")
	}

	// Full again, with nothing left to remove: the state cannot be saved,
	// and the node fails, saying so (a lost "last used" could let a later
	// run's unusedFor remove an image used since).
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	fill(t, n.RootDir())
	common := []string{"--runtime-endpoint=" + n.Endpoint, "--shared-dir=" + t.TempDir(), "--handoff-timeout=1m", "--state-dir=" + stateDir, "--min-age=0s"}
	var wg sync.WaitGroup
	var colRun run
	wg.Go(func() { colRun = runWorker(t, ctx, "collector", append(common, "--scan-disabled")...) })
	remRun := runWorker(t, ctx, "remover", append(append([]string{}, common...), "--scanner=disabled")...)
	wg.Wait()
	if colRun.Code == 0 || !strings.Contains(colRun.Stderr, "after the removals") {
		t.Errorf("collector on a disk still full: exit %d, want a failure saying the state was not saved after the removals\n%s", colRun.Code, colRun.Stderr)
	}
	if remRun.Code == 0 || !strings.Contains(remRun.Stderr, "after the removals") {
		t.Errorf("remover on a disk still full: exit %d, want a failure saying the state was not saved after the removals\n%s", remRun.Code, remRun.Stderr)
	}
}
