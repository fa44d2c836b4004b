package remover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/footprint"
	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Runtime is the part of the CRI client the remover uses.
type Runtime interface {
	ListImages(ctx context.Context) ([]cri.Image, error)
	ListContainers(ctx context.Context) ([]cri.Container, error)
	SandboxImage(ctx context.Context) (string, error)
	PodSandboxImages(ctx context.Context) ([]string, error)
	// StartRemovals issues the removal of images by ID, all at once, and
	// returns a function that waits for them: one error per image.
	StartRemovals(ctx context.Context, ids []string) (wait func() []error)
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
	Policy protect.Policy
	DryRun bool
	// Concurrency bounds the removals in flight; 0: AutoConcurrency,
	// decided once the plan is made.
	Concurrency int
	Log         *slog.Logger
	// Progress, if set, is called after each image with the count done.
	Progress func(done, total int)
	// Info, if set, receives what the run reports besides its results.
	Info *RunInfo

	// Retention is the retention policy; the zero value has no minimum age.
	Retention retention.Settings
	// Now is the time ages are judged at; zero: the clock.
	Now time.Time
	// ImageStore is the runtime's image store root, read for image ages
	// when the runtime serves none (CRI-O); "" for none.
	ImageStore string
	// StateDir holds the node's state file; empty: no state is kept (ages
	// come from the runtime alone).
	StateDir string
	// StateLockWait bounds the wait for another worker's lock on the
	// state; zero: nodestate.DefaultLockWait.
	StateLockWait time.Duration
	// MeasureDisk measures the image filesystem for the disk-pressure
	// policy; nil: unmeasured, and that policy removes nothing.
	MeasureDisk func(ctx context.Context) (retention.Disk, error)
	// MeasureFreed measures the image filesystem around the removals, to
	// tell what they freed; nil where this process cannot see it (a Linux
	// pod without the image filesystem mounted): the runtime's records are
	// measured instead.
	MeasureFreed func(ctx context.Context) (retention.Disk, error)
	// Footprint reads the runtime's records, for the bytes the removals
	// should free; nil: not known.
	Footprint footprint.Reader
	// ContainerdRecords reads containerd's records, where Footprint reads
	// containerd's: the reading after the removals is taken through it,
	// once for both the bytes they freed and the leftover search. nil:
	// each reads for itself.
	ContainerdRecords func(ctx context.Context) (containerdrecords.Records, error)
	// Leftovers finds what removals left on the runtime once the run's
	// removals are done, and reclaims what its policy takes, protected by
	// the run's policy; nil: not looked for (LeftoverFlags.Leftovers).
	// read is containerd's records as read after the removals, when the
	// run read them, or nil: it reads the runtime's records itself.
	Leftovers func(ctx context.Context, p protect.Policy, dryRun bool, read *containerdrecords.Records) ([]reclaim.Result, error)
	// Run names the ImageJob of this run, which the removal ledger records
	// with each removal; "" for "eraser node prune".
	Run string
	// Clock is the time now, for the ledger's removal times; nil: Now
	// plus the time since the run began.
	Clock func() time.Time
	// Registry is the registry check; nil: off.
	Registry *RegistryCheck
	// Protection is the automatic policies' cluster-aware rules' switches
	// and the directory of the cluster's references (references.ReadDir)
	// the run reads for them.
	Protection protect.Flags
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
	case policy.SandboxImage == "" && len(policy.SandboxImages) == 0 && !pinnedPause(images):
		note = "neither the runtime's status nor any pod sandbox named a sandbox image"
	}
	policy.GuessPause = policy.GuessPause || note != ""
	s := NewSnapshot(images, containers, policy)
	s.SandboxGuessed, s.SandboxNote = policy.GuessPause, note
	return s, nil
}

// pinnedPause tells whether the runtime pins an image that looks like a
// pause image: containerd 2.x pins its sandbox image and no longer names it
// in its status. That image is kept as pinned; guessing would also keep
// every other pause-like image, which no sandbox and no configuration needs.
func pinnedPause(images []cri.Image) bool {
	for _, img := range images {
		if img.Pinned && protect.LooksLikePause(img) {
			return true
		}
	}
	return false
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
	// AgeSource says where ages came from (see NodeAges).
	AgeSource string
	// Planning is the time spent on ages, the state file and the plan.
	Planning time.Duration
	// StateErr is why the node's state file could not be written: the
	// run's removals stand, but its observations are lost.
	StateErr error
	// DiskErr is why the disk policy could not judge this node: it
	// would have measured another filesystem than the image filesystem.
	DiskErr error
	// DiskBefore and DiskAfter are the image filesystem around the
	// removals, when the disk policy measured it.
	DiskBefore, DiskAfter *retention.Disk
	// References is what was read of the cluster's references.
	References *references.Stats
	// Freed is what the removals should free and what they freed.
	Freed *workerresult.Freed
	// Leftovers is what removals left on the runtime.
	Leftovers *workerresult.Leftovers
	// Relief is how a run under disk pressure reached its target; nil
	// when the image filesystem was below the high threshold or not
	// measured. A dry run has only the target.
	Relief *Relief
	// Regret is what came back of earlier removals (regret.go).
	Regret *workerresult.Regret
	// RegistryChecks are the registries' answers about planned removals
	// (registry.go).
	RegistryChecks *workerresult.RegistryChecks
}

// Apply adds the run's information to a summary.
func (i RunInfo) Apply(s *workerresult.Summary) {
	s.SandboxImageGuessed = i.SandboxGuessed
	s.MaxRecheckWindowMs = float64(i.MaxRecheckWindow.Microseconds()) / 1000
	s.AgeSource = i.AgeSource
	s.PlanMs = float64(i.Planning.Microseconds()) / 1000
	if i.DiskBefore != nil {
		s.ImageFs = &workerresult.ImageFs{CapacityBytes: i.DiskBefore.Capacity, UsedBeforeBytes: i.DiskBefore.Used(), UsedAfterBytes: i.DiskBefore.Used()}
		if i.DiskAfter != nil {
			s.ImageFs.UsedAfterBytes = i.DiskAfter.Used()
		}
		if p := i.Relief; p != nil {
			s.ImageFs.TargetBytes, s.ImageFs.TargetReached = p.Target, p.Reached
			s.ImageFs.TimeToTargetMs = float64(p.TimeToTarget.Microseconds()) / 1000
			s.ImageFs.FreedToTargetBytes = p.FreedToTarget
		}
	}
	s.Freed = i.Freed
	s.Leftovers = i.Leftovers
	s.RegistryChecks = i.RegistryChecks
	s.Regret = i.Regret
}

// Run removes the targets from the node and reports every outcome.
func Run(ctx context.Context, rt Runtime, t Targets, opts Options) ([]Result, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.Clock == nil {
		began, now := time.Now(), opts.Now
		opts.Clock = func() time.Time { return now.Add(time.Since(began)) }
	}
	info := opts.Info
	if info == nil {
		info = &RunInfo{}
		opts.Info = info
	}
	times := StartImageTimes(ctx, rt, opts.ImageStore)
	snap, err := ReadNode(ctx, rt, opts.Policy)
	if err != nil {
		return nil, err
	}
	if snap.SandboxGuessed {
		opts.Log.Warn("keeping every image that looks like a pause image", "reason", snap.SandboxNote)
	}
	info.SandboxGuessed, info.SandboxNote = snap.SandboxGuessed, snap.SandboxNote
	planStart := time.Now()
	r := Retention{Settings: opts.Retention, Now: opts.Now, Cluster: opts.Protection.Cluster()}
	if err := readCluster(snap, &r.Cluster, opts, info); err != nil {
		return nil, err
	}
	var save func() error
	if r.Ages, info.AgeSource, save, err = NodeAges(snap, times, opts.StateDir, opts.StateLockWait, opts.Now); err != nil {
		return nil, err
	}
	// The node's history is written while the removals run; the run waits
	// for it before it returns.
	saved := make(chan error, 1)
	var regretErr error
	go func() { saved <- save() }()
	defer func() {
		err := <-saved
		if nodestate.DiskFull(err) {
			// A full disk is when removals matter most: they went first,
			// and the state is saved again now that they freed room.
			opts.Log.Warn("the node's disk was full when its state was saved; saved again after the removals", "error", err)
			if err = Reobserve(snap, opts.StateDir, opts.StateLockWait, opts.Now); err != nil {
				err = fmt.Errorf("saving the node's state after the removals (the disk was full before them): %w", err)
			}
		}
		info.StateErr = errors.Join(err, regretErr)
	}()
	r.AgeSource = info.AgeSource
	LogReturns(opts.Log, snap.Returned)
	if info.AgeSource == AgeFirstSeen {
		opts.Log.Info("the runtime does not record when it pulled images: ages count from when Eraser first saw each image on this node")
	}
	diskOn := t.Scheduled && opts.Retention.DiskPressure()
	if diskOn {
		r.Disk = measure(ctx, opts)
		info.DiskBefore = r.Disk
	}
	remove, results, spare := Plan(snap, t, r)
	info.Planning = time.Since(planStart)
	if opts.Concurrency < 1 {
		opts.Concurrency = AutoConcurrency()
	}
	opts.Log.Debug("removing", "concurrency", opts.Concurrency)
	var queue []int
	var prior map[int]Result
	pressure := diskOn && r.Disk != nil && r.Disk.Percent() >= float64(opts.Retention.HighThresholdPercent)
	// The registry check, before any removal: of the plan's, and of the
	// candidates a drain under pressure may take (registry.go).
	var drainable []retention.Candidate
	if pressure && !opts.DryRun {
		drainable = spare
	}
	remove, kept, drainable := checkRegistry(ctx, snap, r, remove, drainable, opts, info)
	results = append(results, kept...)
	if pressure && !opts.DryRun {
		spare = drainable
	}
	if pressure {
		info.Relief = &Relief{Target: opts.Retention.Target(*r.Disk)}
	}
	if pressure && !opts.DryRun {
		// Under pressure a real run removes by measurement, not by the
		// plan's estimate: the disk policy's choices and the candidates it
		// would take next form a queue, drained after the other removals.
		remove, results, queue, prior = diskQueue(snap, remove, results, spare)
	}
	for _, res := range results {
		logResult(opts.Log, res, opts.DryRun)
	}
	probe := probeFreed(ctx, opts, r.Disk)
	done := execute(ctx, rt, snap, remove, opts)
	if diskOn && r.Disk != nil && !opts.DryRun {
		relief := info.Relief
		if relief == nil {
			relief = &Relief{}
		}
		var more []Result
		more, info.DiskAfter = drainDisk(ctx, rt, snap, r, queue, prior, opts, relief)
		done = append(done, more...)
		if info.Relief != nil {
			logRelief(opts.Log, *info.Relief, info.DiskAfter)
		}
	}
	// Logged once judged: the per-node report is read from these lines.
	settle(ctx, rt, done, opts.Log)
	retryRefusedForRoom(ctx, rt, snap, done, opts)
	for _, res := range done {
		logResult(opts.Log, res, opts.DryRun)
	}
	if info.Regret, regretErr = recordRemovals(snap, done, opts, opts.Clock()); regretErr != nil {
		regretErr = fmt.Errorf("the node's removal ledger: %w", regretErr)
		opts.Log.Error("the run's removals are not in the node's removal ledger", "error", regretErr)
	}
	var read *containerdrecords.Records
	if info.Freed, read = probe.finish(ctx, opts, snap, done); info.Freed != nil && info.Freed.Note != "" {
		opts.Log.Warn("the image filesystem gained other than the removals should have freed", "expectedBytes", info.Freed.ExpectedBytes, "measuredBytes", info.Freed.MeasuredBytes, "measuredBy", info.Freed.MeasuredBy, "cause", info.Freed.Note)
	}
	// The sandbox images the run found are protected as its removals were.
	info.Leftovers = leftovers(ctx, opts, snap.policy, read)
	return append(results, done...), nil
}

// RecheckGroup is how many removals one container listing clears. Each
// group gets a fresh listing right before its removals are issued, while
// earlier groups are still in flight: the window between the listing and a
// removal is a listing plus the issue of at most this many streams, however
// large the batch in flight (the Concurrency).
const RecheckGroup = 64

// MaxRecheckAge bounds the time from the start of the listing that cleared
// an image to the issue of its removal. A listing slower than this is taken
// again once; if that is slow too the group's images are kept and failed.
const MaxRecheckAge = 500 * time.Millisecond

// group is a group of removals issued together.
type group struct {
	results []Result
	pending []int // indexes in results of the removals issued
	wait    func() []error
}

// execute removes the planned images in groups of RecheckGroup, each cleared
// by its own container listing, keeping up to opts.Concurrency removals in
// flight: containerd serves removals in flight together with one clean-up
// pass, so throughput needs many in flight, and safety needs a fresh list
// for each few.
func execute(ctx context.Context, rt Runtime, s *Snapshot, remove []Removal, opts Options) []Result {
	out := make([]Result, 0, len(remove))
	var inflight []*group
	flying := 0
	collect := func() {
		g := inflight[0]
		inflight = inflight[1:]
		flying -= len(g.pending)
		finish(g)
		for _, r := range g.results {
			out = append(out, r)
			if opts.Progress != nil {
				opts.Progress(len(out), len(remove))
			}
		}
	}
	info := opts.Info
	if info == nil {
		info = &RunInfo{}
	}
	size := min(RecheckGroup, opts.Concurrency)
	for start := 0; start < len(remove); start += size {
		batch := remove[start:min(len(remove), start+size)]
		for len(inflight) > 0 && flying+len(batch) > opts.Concurrency {
			collect()
		}
		g := startGroup(ctx, rt, s, batch, opts.DryRun, info)
		flying += len(g.pending)
		inflight = append(inflight, g)
	}
	for len(inflight) > 0 {
		collect()
	}
	return out
}

// finish waits for a group's removals and records their outcomes.
func finish(g *group) {
	if g.wait == nil {
		return
	}
	for k, err := range g.wait() {
		n := g.pending[k]
		g.results[n].attempted, g.results[n].err = true, err
		// Provisional until settle has seen the node after the removals.
		if err != nil {
			g.results[n].Outcome, g.results[n].Detail = workerresult.Failed, err.Error()
		} else {
			g.results[n].Outcome = workerresult.Removed
		}
	}
}

// startGroup re-checks, on a container list taken right before the issue,
// that no container uses the images, and issues the removal of the rest
// without waiting for them.
func startGroup(ctx context.Context, rt Runtime, s *Snapshot, batch []Removal, dryRun bool, info *RunInfo) *group {
	g := &group{results: make([]Result, len(batch))}
	for n, rm := range batch {
		img := s.Images[rm.Image]
		g.results[n] = Result{Target: rm.Target, ImageID: img.ID, Names: img.Tags, Bytes: img.Size, Policy: rm.Policy, Detail: rm.Detail}
	}
	fail := func(detail string) *group {
		for n := range g.results {
			g.results[n].Outcome, g.results[n].Detail = workerresult.Failed, detail
		}
		return g
	}
	if err := ctx.Err(); err != nil {
		return fail("not attempted: " + err.Error())
	}
	used, listed, err := recheck(ctx, rt, info)
	if err != nil {
		// Without a fresh list we cannot know the images are unused: keep them.
		return fail("re-check of containers failed, image kept: " + err.Error())
	}
	var ids []string
	for n, rm := range batch {
		img := s.Images[rm.Image]
		if v := protect.UsedNow(img, used); v.Reason != protect.Removable {
			g.results[n].Outcome, g.results[n].Detail = v.Reason, v.Detail+" (started after the node was read)"
			continue
		}
		if dryRun {
			g.results[n].Outcome, g.results[n].Detail = workerresult.Removed, strings.TrimSuffix("dry run; "+g.results[n].Detail, "; ")
			continue
		}
		ids = append(ids, g.results[n].ImageID)
		g.pending = append(g.pending, n)
	}
	if len(ids) == 0 {
		return g
	}
	g.wait = rt.StartRemovals(ctx, ids)
	info.MaxRecheckWindow = max(info.MaxRecheckWindow, time.Since(listed))
	return g
}

// recheck lists the containers, and when the listing took longer than
// MaxRecheckAge lists them once more; it returns when the listing started.
func recheck(ctx context.Context, rt Runtime, info *RunInfo) (protect.Containers, time.Time, error) {
	for attempt := 0; ; attempt++ {
		started := time.Now()
		containers, err := rt.ListContainers(ctx)
		info.Rechecks++
		if err != nil {
			return protect.Containers{}, started, err
		}
		if took := time.Since(started); took > MaxRecheckAge {
			if attempt == 0 {
				continue
			}
			return protect.Containers{}, started, fmt.Errorf("listing containers took %v, over the %v a re-check may be old", took.Round(time.Millisecond), MaxRecheckAge)
		}
		return protect.NewContainers(containers), started, nil
	}
}
