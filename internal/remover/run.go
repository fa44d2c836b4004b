package remover

import (
	"context"
	"log/slog"
	"time"

	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/protect"
	"github.com/eraser-oss/eraser/internal/report"
	"github.com/eraser-oss/eraser/internal/worker"
)

// Runtime is the part of the CRI client the remover uses.
type Runtime interface {
	ListImages(ctx context.Context) ([]cri.Image, error)
	ListContainers(ctx context.Context) ([]cri.Container, error)
	SandboxImage(ctx context.Context) (string, error)
	PodSandboxImages(ctx context.Context) ([]string, error)
	// RemoveImages removes images by ID, all at once; one error per image.
	RemoveImages(ctx context.Context, ids []string) []error
}

var _ Runtime = (*cri.Client)(nil)

// DefaultConcurrency is how many removals are issued at once. containerd
// makes each RemoveImage wait for a clean-up pass over every image on the
// node, and removals in flight together share that pass, so a
// one-at-a-time loop is many times slower than issuing them all at once.
// Removals are streams issued from one goroutine; each in flight still costs
// about 14 KiB, so the remover sizes its batches to its memory limit
// (AutoConcurrency) and this is the most it issues.
const DefaultConcurrency = 4096

// Options configure a run.
type Options struct {
	Policy      protect.Policy
	DryRun      bool
	Concurrency int
	Log         *slog.Logger
	// Progress, if set, is called after each image with the count done.
	Progress func(done, total int)
	// Info, if set, receives what the run reports besides its results.
	Info *RunInfo
}

// ReadNode reads the node (images, containers, sandbox images) and judges
// every image by the policy. The sandbox (pause) image comes from the
// runtime's status and from the node's pod sandboxes; when neither names
// one, or the sandboxes cannot be read, every image that looks like a pause
// image is kept as well (Snapshot.SandboxGuessed says so).
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
	pods, podErr := rt.PodSandboxImages(ctx)
	policy.SandboxImages = append(policy.SandboxImages, pods...)
	var note string
	switch {
	case podErr != nil:
		note = "the pod sandboxes could not be read: " + podErr.Error()
	case policy.SandboxImage == "" && len(policy.SandboxImages) == 0:
		note = "neither the runtime's status nor any pod sandbox named a sandbox image"
	}
	policy.GuessPause = policy.GuessPause || note != ""
	s := NewSnapshot(images, containers, policy)
	s.SandboxGuessed, s.SandboxNote = policy.GuessPause, note
	return s, nil
}

// RunInfo is what a run reports besides its results.
type RunInfo struct {
	// SandboxGuessed: pause images were kept by their names (see ReadNode).
	SandboxGuessed bool
	// SandboxNote says why, when guessed.
	SandboxNote string
	// Rechecks counts the container listings taken before removals.
	Rechecks int
	// MaxRecheckWindow is the longest time from the start of the listing
	// that cleared an image to the issue of its removal.
	MaxRecheckWindow time.Duration
}

// Apply adds the run's information to a summary.
func (i RunInfo) Apply(s *report.Summary) {
	s.SandboxImageGuessed = i.SandboxGuessed
	s.MaxRecheckWindowMs = float64(i.MaxRecheckWindow.Microseconds()) / 1000
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
	if snap.SandboxGuessed {
		opts.Log.Warn("keeping every image that looks like a pause image", "reason", snap.SandboxNote)
	}
	if opts.Info != nil {
		opts.Info.SandboxGuessed, opts.Info.SandboxNote = snap.SandboxGuessed, snap.SandboxNote
	}
	remove, results := Plan(snap, t)
	for _, r := range results {
		logResult(opts.Log, r, opts.DryRun)
	}
	removed := execute(ctx, rt, snap, remove, opts)
	return append(results, removed...), nil
}

// execute removes the planned images in batches of opts.Concurrency.
func execute(ctx context.Context, rt Runtime, s *Snapshot, remove []Removal, opts Options) []Result {
	out := make([]Result, 0, len(remove))
	for start := 0; start < len(remove); start += opts.Concurrency {
		batch := remove[start:min(len(remove), start+opts.Concurrency)]
		for _, r := range removeBatch(ctx, rt, s, batch, opts.DryRun) {
			out = append(out, r)
			logResult(opts.Log, r, opts.DryRun)
			if opts.Progress != nil {
				opts.Progress(len(out), len(remove))
			}
		}
	}
	return out
}

// removeBatch re-checks, on a container list taken after the batch was
// chosen and right before its removals are issued, that no container uses
// the images, then removes the rest all at once.
func removeBatch(ctx context.Context, rt Runtime, s *Snapshot, batch []Removal, dryRun bool) []Result {
	results := make([]Result, len(batch))
	for n, rm := range batch {
		img := s.Images[rm.Image]
		results[n] = Result{Target: rm.Target, ImageID: img.ID, Names: img.Tags, Bytes: img.Size}
	}
	fail := func(detail string) []Result {
		for n := range results {
			results[n].Outcome, results[n].Detail = Failed, detail
		}
		return results
	}
	if err := ctx.Err(); err != nil {
		return fail("not attempted: " + err.Error())
	}
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		// Without a fresh list we cannot know the images are unused: keep them.
		return fail("re-check of containers failed, image kept: " + err.Error())
	}
	used := protect.NewContainers(containers)
	var ids []string
	var pending []int
	for n, rm := range batch {
		if v := (protect.Policy{}).Check(s.Images[rm.Image], s.keys[rm.Image], used); v.Reason == protect.InUse {
			results[n].Outcome, results[n].Detail = InUse, v.Detail+" (started after the node was read)"
			continue
		}
		if dryRun {
			results[n].Outcome, results[n].Detail = Removed, "dry run"
			continue
		}
		ids = append(ids, results[n].ImageID)
		pending = append(pending, n)
	}
	if len(ids) == 0 {
		return results
	}
	for k, err := range rt.RemoveImages(ctx, ids) {
		n := pending[k]
		if err != nil {
			results[n].Outcome, results[n].Detail = Failed, err.Error()
		} else {
			results[n].Outcome = Removed
		}
	}
	return results
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

// NodeOutcome decides whether the node failed: it did when any removal it
// was asked for failed. Images kept because they are in use, pinned (the
// sandbox image included), excluded or not on the node are not failures, nor
// is an image that was already gone when removed (the CRI client reports
// NotFound as success). Invalid ImageList entries are counted, not failed:
// nothing is removed for them and the manager totals them with failures.
func NodeOutcome(s report.Summary) error {
	failed := s.Counts[string(Failed)]
	if failed == 0 {
		return nil
	}
	first := "(not recorded)"
	for _, f := range s.Failures {
		if !f.Invalid {
			first = f.Image + ": " + f.Message
			break
		}
	}
	return &worker.NodeFailedError{Failed: failed, Attempted: failed + s.Counts[string(Removed)], First: first}
}

// Summarize counts the results.
func Summarize(results []Result, dryRun bool) report.Summary {
	s := report.Summary{Component: "remover", DryRun: dryRun, Counts: map[string]int{}}
	for _, r := range results {
		s.Counts[string(r.Outcome)]++
		switch r.Outcome {
		case Removed:
			s.BytesFreed += r.Bytes
		case Failed:
			s.AddFailure(r.Target, r.Detail)
		case Invalid:
			s.AddInvalid(r.Target, r.Detail)
		}
	}
	return s
}
