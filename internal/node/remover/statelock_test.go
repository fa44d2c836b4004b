package remover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/node/retention"
)

// TestStateLock: a run waits a bounded time for another holder of the
// node's state lock, then fails before removing anything; a run that got
// the lock has released it by the time it returns.
func TestStateLock(t *testing.T) {
	dir := stateDir(t)
	targets, _ := ParseTargets([]string{"*"})
	opts := func() Options {
		return Options{Retention: retention.Settings{}, Now: t0, StateDir: dir, StateLockWait: 200 * time.Millisecond, Info: &RunInfo{}}
	}

	held, err := nodestate.AcquireLock(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rt := &fakeRuntime{images: []cri.Image{alpine, nginx}}
	if _, err := Run(context.Background(), rt, targets, opts()); !errors.Is(err, nodestate.ErrLockTimeout) {
		t.Fatalf("Run under another's lock: %v, want %v", err, nodestate.ErrLockTimeout)
	}
	if len(rt.removed) != 0 {
		t.Fatalf("a run that could not lock the state removed %v", rt.removed)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}

	o := opts()
	if _, err := Run(context.Background(), rt, targets, o); err != nil || o.Info.StateErr != nil || len(rt.removed) != 2 {
		t.Fatalf("Run: %v, state: %v, removed %v", err, o.Info.StateErr, rt.removed)
	}
	after, err := nodestate.AcquireLock(dir, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("after a run: %v", err)
	}
	_ = after.Release()
}
