package remover

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/protect"
	"github.com/eraser-oss/eraser/internal/report"
)

// Runtime is the part of the CRI client the remover uses.
type Runtime interface {
	ListImages(ctx context.Context) ([]cri.Image, error)
	ListContainers(ctx context.Context) ([]cri.Container, error)
	SandboxImage(ctx context.Context) (string, error)
	RemoveImage(ctx context.Context, id string) error
}

var _ Runtime = (*cri.Client)(nil)

// DefaultConcurrency is how many removals run at once. containerd makes each
// RemoveImage wait for a clean-up pass over every image on the node, and
// concurrent removals share that pass, so a one-at-a-time loop is many times
// slower than a wide one on a node with many images.
const DefaultConcurrency = 256

// Options configure a run.
type Options struct {
	Policy      protect.Policy
	DryRun      bool
	Concurrency int
	Log         *slog.Logger
	// Progress, if set, is called after each image with the count done.
	Progress func(done, total int)
}

// ReadNode reads the node (images, containers, sandbox image) and judges
// every image by the policy.
func ReadNode(ctx context.Context, rt Runtime, policy protect.Policy) (*Snapshot, error) {
	images, err := rt.ListImages(ctx)
	if err != nil {
		return nil, err
	}
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	if policy.SandboxImage == "" {
		sandbox, err := rt.SandboxImage(ctx)
		if err != nil {
			return nil, err
		}
		policy.SandboxImage = sandbox
	}
	return NewSnapshot(images, containers, policy), nil
}

// Run removes the targets from the node and reports every outcome.
func Run(ctx context.Context, rt Runtime, t Targets, opts Options) ([]Result, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = DefaultConcurrency
	}
	snap, err := ReadNode(ctx, rt, opts.Policy)
	if err != nil {
		return nil, err
	}
	remove, results := Plan(snap, t)
	for _, r := range results {
		logResult(opts.Log, r, opts.DryRun)
	}
	removed := execute(ctx, rt, snap, remove, opts)
	return append(results, removed...), nil
}

// execute removes the planned images, at most opts.Concurrency at a time.
func execute(ctx context.Context, rt Runtime, s *Snapshot, remove []Removal, opts Options) []Result {
	out := make([]Result, len(remove))
	recheck := newRechecker(rt.ListContainers)
	sem := make(chan struct{}, opts.Concurrency)
	var wg sync.WaitGroup
	var done atomic.Int64
	for n, rm := range remove {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[n] = removeOne(ctx, rt, s, rm, recheck, opts.DryRun)
			logResult(opts.Log, out[n], opts.DryRun)
			if opts.Progress != nil {
				opts.Progress(int(done.Add(1)), len(remove))
			}
		})
	}
	wg.Wait()
	return out
}

// removeOne re-checks that no container uses the image, on a container list
// taken after this image came up, then removes it.
func removeOne(ctx context.Context, rt Runtime, s *Snapshot, rm Removal, recheck *rechecker, dryRun bool) Result {
	i := rm.Image
	img := s.Images[i]
	r := Result{Target: rm.Target, ImageID: img.ID, Names: img.Tags, Bytes: img.Size}
	if err := ctx.Err(); err != nil {
		r.Outcome, r.Detail = Failed, "not attempted: "+err.Error()
		return r
	}
	used, err := recheck.containers(ctx)
	if err != nil {
		// Without a fresh list we cannot know the image is unused: keep it.
		r.Outcome, r.Detail = Failed, "re-check of running containers failed, image kept: "+err.Error()
		return r
	}
	if v := (protect.Policy{}).Check(img, s.keys[i], used); v.Reason == protect.InUse {
		r.Outcome, r.Detail = InUse, v.Detail+" (started after the list was made)"
		return r
	}
	if dryRun {
		r.Outcome, r.Detail = Removed, "dry run"
		return r
	}
	if err := rt.RemoveImage(ctx, img.ID); err != nil {
		r.Outcome, r.Detail = Failed, err.Error()
		return r
	}
	r.Outcome = Removed
	return r
}

func logResult(log *slog.Logger, r Result, dryRun bool) {
	attrs := []any{"outcome", string(r.Outcome), "target", r.Target}
	if r.ImageID != "" {
		attrs = append(attrs, "image", r.ImageID, "names", r.Names)
	}
	if r.Outcome == Removed {
		attrs = append(attrs, "bytes", r.Bytes)
	}
	if r.Detail != "" {
		attrs = append(attrs, "detail", r.Detail)
	}
	if dryRun {
		attrs = append(attrs, "dryRun", true)
	}
	level := slog.LevelInfo
	if r.Outcome == Failed || r.Outcome == Invalid {
		level = slog.LevelError
	}
	log.Log(context.Background(), level, "image", attrs...)
}

// Summarize counts the results.
func Summarize(results []Result, dryRun bool) report.Summary {
	s := report.Summary{Component: "remover", DryRun: dryRun, Counts: map[string]int{}}
	for _, r := range results {
		s.Counts[string(r.Outcome)]++
		switch r.Outcome {
		case Removed:
			s.BytesFreed += r.Bytes
		case Failed, Invalid:
			s.AddFailure(r.Target, r.Detail)
		}
	}
	return s
}

// rechecker lists containers for removals that need a list taken after they
// asked. Removals that ask while a listing is pending join it; at most one
// listing runs at a time, so thousands of removals share a handful of lists.
type rechecker struct {
	list  func(context.Context) ([]cri.Container, error)
	runMu sync.Mutex // one listing at a time
	mu    sync.Mutex
	next  *listing // not started yet: safe to join
}

type listing struct {
	done chan struct{}
	used protect.Containers
	err  error
}

func newRechecker(list func(context.Context) ([]cri.Container, error)) *rechecker {
	return &rechecker{list: list}
}

func (r *rechecker) containers(ctx context.Context) (protect.Containers, error) {
	r.mu.Lock()
	l := r.next
	if l == nil {
		l = &listing{done: make(chan struct{})}
		r.next = l
		go r.run(l)
	}
	r.mu.Unlock()
	select {
	case <-l.done:
		return l.used, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *rechecker) run(l *listing) {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	// From here on the listing has started: later arrivals need a new one.
	r.mu.Lock()
	if r.next == l {
		r.next = nil
	}
	r.mu.Unlock()
	// The listing serves many removals; one caller's cancellation must not
	// fail it for the others.
	containers, err := r.list(context.Background())
	if err != nil {
		l.err = fmt.Errorf("listing containers: %w", err)
	} else {
		l.used = protect.NewContainers(containers)
	}
	close(l.done)
}
