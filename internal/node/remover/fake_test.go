package remover

import (
	"context"
	"sync"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
)

// fakeRuntime is an in-memory runtime; onList runs after each container
// listing, to play a kubelet starting containers mid-run.
type fakeRuntime struct {
	mu         sync.Mutex
	images     []cri.Image
	containers []cri.Container
	sandbox    string
	podImages  []string
	podErr     error
	removeErr  map[string]error
	// refuseOnce answers an image's first removal with its error; later
	// ones go through.
	refuseOnce map[string]error
	attempts   map[string]int
	listErr    error
	lists      int
	onList     func(n int, f *fakeRuntime)
	listDelay  time.Duration
	removed    []string
	// sinceList counts, per removal issued, the removals issued since the
	// last container listing (this one included).
	sinceList  []int
	issuedHere int
}

// ListImages lists the images not removed yet, as a runtime does.
func (f *fakeRuntime) ListImages(context.Context) ([]cri.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gone := map[string]bool{}
	for _, id := range f.removed {
		gone[id] = true
	}
	var out []cri.Image
	for _, img := range f.images {
		if !gone[img.ID] {
			out = append(out, img)
		}
	}
	return out, nil
}

func (f *fakeRuntime) ListContainers(context.Context) ([]cri.Container, error) {
	time.Sleep(f.listDelay)
	f.mu.Lock()
	f.lists++
	f.issuedHere = 0
	n, hook := f.lists, f.onList
	out, err := append([]cri.Container(nil), f.containers...), f.listErr
	if n > 1 && f.listErr != nil {
		err = f.listErr
	} else if n == 1 {
		err = nil
	}
	f.mu.Unlock()
	if hook != nil {
		hook(n, f)
	}
	return out, err
}

func (f *fakeRuntime) SandboxImage(context.Context) (string, error) { return f.sandbox, nil }

func (f *fakeRuntime) PodSandboxImages(context.Context) ([]string, error) {
	return f.podImages, f.podErr
}

func (f *fakeRuntime) StartRemovals(ctx context.Context, ids []string) func() []error {
	errs := make([]error, len(ids))
	for i, id := range ids {
		f.mu.Lock()
		f.issuedHere++
		f.sinceList = append(f.sinceList, f.issuedHere)
		f.mu.Unlock()
		errs[i] = f.RemoveImage(ctx, id)
	}
	return func() []error { return errs }
}

func (f *fakeRuntime) RemoveImage(_ context.Context, imageID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts = map[string]int{}
	}
	f.attempts[imageID]++
	if err := f.removeErr[imageID]; err != nil {
		return err
	}
	if err := f.refuseOnce[imageID]; err != nil && f.attempts[imageID] == 1 {
		return err
	}
	f.removed = append(f.removed, imageID)
	return nil
}
