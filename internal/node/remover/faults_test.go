//go:build linux

package remover_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// faultyRuntime is the real runtime with a fault injected at a chosen call.
type faultyRuntime struct {
	*cri.Client
	mu      sync.Mutex
	lists   int
	starts  int
	onList  func(n int)
	onStart func(n int)
}

func (f *faultyRuntime) ListContainers(ctx context.Context) ([]cri.Container, error) {
	f.mu.Lock()
	f.lists++
	n := f.lists
	f.mu.Unlock()
	if f.onList != nil {
		f.onList(n)
	}
	return f.Client.ListContainers(ctx)
}

func (f *faultyRuntime) StartRemovals(ctx context.Context, ids []string) func() []error {
	wait := f.Client.StartRemovals(ctx, ids)
	f.mu.Lock()
	f.starts++
	n := f.starts
	f.mu.Unlock()
	if f.onStart != nil {
		f.onStart(n)
	}
	return wait
}

func junk(n int) ([]testimage.Image, []string) {
	var imgs []testimage.Image
	var tags []string
	for i := range n {
		tag := fmt.Sprintf("example.com/fault/junk%03d:1", i)
		imgs = append(imgs, testimage.Image{Tags: []string{tag}, RandomBytes: 64})
		tags = append(tags, tag)
	}
	return imgs, tags
}

// TestContainerdRestartMidBatch: containerd is killed while removals are in
// flight and comes back while the run goes on, and a container starts from
// one of the targets meanwhile. No image a container uses is removed, and
// the node fails: what could not be removed is counted and named.
func TestContainerdRestartMidBatch(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	imgs, tags := junk(4 * remover.RecheckGroup)
	imgs[0].Files, imgs[0].Entrypoint = map[string][]byte{"pause": testimage.Pause(t)}, []string{"/pause"}
	late := testimage.Image{Tags: []string{"example.com/fault/late:1"}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: 64}
	ctrd.Import(t, append(imgs, late)...)
	ctrd.RunContainer(t, "running", tags[0])

	rt := &faultyRuntime{Client: ctrd.Client(t)}
	var once sync.Once
	rt.onStart = func(n int) {
		if n == 1 {
			ctrd.Kill(t)
		}
	}
	rt.onList = func(n int) {
		// The listing after the kill fails; bring containerd back behind
		// it, and start a container from the last target.
		if n == 4 {
			once.Do(func() {
				ctrd.Restart(t)
				ctrd.RunContainer(t, "late", "example.com/fault/late:1")
			})
		}
	}
	targets, _ := remover.ParseTargets(append(tags, "example.com/fault/late:1"))
	results, err := remover.Run(context.Background(), rt, targets, remover.Options{Concurrency: 4096})
	if err != nil {
		t.Fatal(err)
	}
	s := remover.Summarize(results, false)
	nodeErr := remover.NodeOutcome(s)
	if code := worker.ExitCode(nodeErr); code != workerresult.ExitNodeFailed || s.Counts["failed"] == 0 {
		t.Errorf("exit code %d, counts %v: want a failed node (2) with failures counted", code, s.Counts)
	}
	if nodeErr == nil || !strings.Contains(nodeErr.Error(), "removals failed; first:") {
		t.Errorf("node error %v", nodeErr)
	}
	for _, r := range results {
		if r.Outcome == workerresult.Removed && (r.Target == tags[0] || r.Target == "example.com/fault/late:1") {
			t.Errorf("%s is used by a container but was removed", r.Target)
		}
	}
	present := ctrd.ImageIDs(t)
	for _, used := range []string{tags[0], "example.com/fault/late:1"} {
		if _, ok := present[used]; !ok {
			t.Errorf("%s, used by a container, is gone", used)
		}
	}
}

// TestHungRuntime: containerd stops answering (SIGSTOP) after the node was
// read; the per-call timeout ends the re-check with an error, nothing is
// removed, and the node fails.
func TestHungRuntime(t *testing.T) {
	ctrd := testcontainerd.Start(t)
	imgs, tags := junk(3)
	ctrd.Import(t, imgs...)
	timeouts := cri.DefaultTimeouts
	timeouts.List, timeouts.Remove = 2*time.Second, 3*time.Second
	client, err := cri.Dial(context.Background(), ctrd.Endpoint, timeouts)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	rt := &faultyRuntime{Client: client}
	rt.onList = func(n int) {
		if n == 2 {
			ctrd.Stop(t)
		}
	}
	defer func() { _ = ctrd.Signal(syscall.SIGCONT) }()
	targets, _ := remover.ParseTargets(tags)
	start := time.Now()
	results, err := remover.Run(context.Background(), rt, targets, remover.Options{})
	took := time.Since(start)
	_ = ctrd.Signal(syscall.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	if took > 30*time.Second {
		t.Errorf("the run took %v with a hung runtime; the per-call timeout is 2s", took)
	}
	for _, r := range results {
		if r.Outcome != workerresult.Failed || !strings.Contains(r.Detail, "DeadlineExceeded") || !strings.Contains(r.Detail, "image kept") {
			t.Errorf("%s: %s %q, want failed on the deadline, image kept", r.Target, r.Outcome, r.Detail)
		}
	}
	if code := worker.ExitCode(remover.NodeOutcome(remover.Summarize(results, false))); code != workerresult.ExitNodeFailed {
		t.Errorf("exit code %d, want 2", code)
	}
	present := ctrd.ImageIDs(t)
	for _, tag := range tags {
		if _, ok := present[tag]; !ok {
			t.Errorf("%s was removed although its re-check never answered", tag)
		}
	}
}
