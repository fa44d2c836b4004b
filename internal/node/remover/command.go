package remover

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// DefaultSummaryFile is the container's termination message path.
const DefaultSummaryFile = "/dev/termination-log"

// Command is the remover binary.
type Command struct {
	worker.Flags
	// ImageList is a JSON array of entries; empty means read the hand-off.
	ImageList   string
	DryRun      bool
	Concurrency int
	SummaryFile string
	// Scanner is --scanner: whether the pod runs a scanner (see Sender).
	Scanner    string
	Retention  retention.Flags
	Protection protect.Flags
	Leftover   LeftoverFlags
	Registry   RegistryFlags
	// Job is --run: the ImageJob this remover works for, which the node's
	// removal ledger records with each removal.
	Job string
}

// Bind registers the remover's flags.
func (c *Command) Bind(fs *flag.FlagSet) {
	c.Flags.Bind(fs)
	fs.StringVar(&c.ImageList, "imagelist", "", "JSON array of images to remove; empty: receive them from the collector or scanner")
	fs.BoolVar(&c.DryRun, "dry-run", false, "report what would be removed, remove nothing")
	fs.IntVar(&c.Concurrency, "concurrency", 0, "removals issued at once; 0: as many as the container's memory limit allows, at most 4096")
	fs.StringVar(&c.Scanner, "scanner", "", "whether the pod runs a scanner, whose list is then the only one taken: enabled or disabled; required without --imagelist")
	fs.StringVar(&c.SummaryFile, "summary-file", DefaultSummaryFile, "where to write the JSON summary (the termination message)")
	c.Retention.Bind(fs, podpaths.StateDir(worker.NodeOS))
	c.Protection.Bind(fs)
	c.Leftover.Bind(fs)
	c.Registry.Bind(fs)
	c.Leftover.MinLeaseAge = workerdefaults.MinLeaseAge
	fs.StringVar(&c.Job, "run", "", "the ImageJob this run belongs to, recorded with each removal in the node's removal ledger")
}

// Run runs the remover and returns the process exit code: 0 when the run
// completed (images kept for a reason are not failures), 1 when it could not
// run at all, 2 when removals failed (workerresult.ExitNodeFailed).
func (c *Command) Run(ctx context.Context) int {
	log := c.Start("remover")
	summary, err := c.run(ctx, log)
	return worker.Finish(log, c.SummaryFile, summary, err)
}

func (c *Command) run(ctx context.Context, log *slog.Logger) (workerresult.Summary, error) {
	empty := workerresult.Summary{Component: "remover", DryRun: c.DryRun, Counts: map[string]int{}}
	pipeline := c.ImageList == ""
	if pipeline {
		// The collector (and scanner) wait for this signal on every path,
		// or they would hang when the remover fails.
		defer c.signalDone(log)
	}
	sender := ""
	if pipeline {
		var err error
		if sender, err = Sender(c.Scanner); err != nil {
			return empty, err
		}
	}
	if err := c.Retention.Validate(); err != nil {
		return empty, err
	}
	now, err := c.Retention.Clock()
	if err != nil {
		return empty, err
	}
	pats, err := c.Exclusions(log)
	if err != nil {
		return empty, err
	}
	var targets Targets
	var invalid []Result
	if pipeline {
		targets, err = c.receive(ctx, sender)
		targets.Scanned = sender == "scanner"
	} else {
		var entries []string
		if entries, err = readImageList(c.ImageList); err == nil {
			targets, invalid = ParseTargets(entries)
		}
	}
	if err != nil {
		return empty, err
	}
	for _, r := range invalid {
		logResult(log, r, c.DryRun)
	}
	client, err := c.Dial(ctx, log)
	if err != nil {
		return empty, err
	}
	defer client.Close()
	var info RunInfo
	opts := Options{
		Policy: protect.Policy{Exclusions: pats}, DryRun: c.DryRun, Concurrency: c.Concurrency, Log: log, Info: &info,
		Retention: c.Retention.Settings, Now: now, StateDir: c.Retention.StateDir, StateLockWait: c.Retention.StateLockWait, ImageStore: c.Retention.ImageStore,
		MeasureDisk: ImageFsMeter(client, c.Retention.ImageFsPath), Protection: c.Protection,
		Run: c.Job, Clock: clockFrom(now, c.Retention.Now != ""),
	}
	if opts.Registry, err = c.Registry.Settings(); err != nil {
		return empty, err
	}
	SetFreedMeters(&opts, client, c.Retention.ImageFsPath, c.Retention.ImageStore, worker.NodeOS == podpaths.Windows)
	if opts.Leftovers, err = c.Leftover.Leftovers(client, c.Retention.ImageStore, opts.MeasureFreed); err != nil {
		return empty, err
	}
	results, err := Run(ctx, client, targets, opts)
	if err != nil {
		return empty, err
	}
	summary := Summarize(append(invalid, results...), c.DryRun)
	info.Apply(&summary)
	return summary, errors.Join(NodeOutcome(summary), info.StateErr, info.DiskErr)
}

// clockFrom is the run's clock: the real one, or one that runs on from now
// when --now set it.
func clockFrom(now time.Time, set bool) func() time.Time {
	if !set {
		return time.Now
	}
	began := time.Now()
	return func() time.Time { return now.Add(time.Since(began)) }
}

func readImageList(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading image list: %w", err)
	}
	var entries []string
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("image list %s is not a JSON array of strings: %w", path, err)
	}
	return entries, nil
}

// receive takes the images handed on by the scanner or the collector and
// checks them against the collector's record: the whole hand-off is
// refused, and nothing removed, if any entry is not one it listed.
// When sender is the scanner, a list that never comes removes nothing: the
// collector's list on the same endpoint is never taken in its place.
func (c *Command) receive(ctx context.Context, sender string) (Targets, error) {
	var images []handoff.Image
	err := c.WaitFor(ctx, sender, "no images from the", func(ctx context.Context) (err error) {
		images, err = c.Transport.ReceiveImages(ctx, handoff.Path(c.SharedDir, handoff.ScanErase))
		return err
	})
	if err != nil {
		return Targets{}, fmt.Errorf("hand-off refused, nothing removed: %w", err)
	}
	collected, err := handoff.ReadCollected(c.SharedDir)
	if err != nil {
		return Targets{}, err
	}
	return HandoffTargets(images, collected)
}

// HandoffTargets turns a hand-off into a scheduled run's targets: each
// entry's image_id must be the ID, or a digest, of an image the collector
// listed. Names and digests sent along are not targets: only the ID selects
// an image, so a hand-off never selects more images than it has entries.
// The retention policies then choose among the collected images.
func HandoffTargets(received, collected []handoff.Image) (Targets, error) {
	t := Targets{Scheduled: true}
	listed := map[string]bool{}
	for _, img := range collected {
		for _, s := range append([]string{img.ImageID}, img.Digests...) {
			if d, ok := handoff.NormalID(s); ok {
				listed[d] = true
			}
		}
		if d, ok := handoff.NormalID(img.ImageID); ok {
			t.Collected = append(t.Collected, d)
		}
	}
	for i, img := range received {
		d, ok := handoff.NormalID(img.ImageID)
		if !ok {
			return Targets{}, fmt.Errorf("hand-off refused, nothing removed: [%d]: %q is not an image ID or digest", i, img.ImageID)
		}
		if !listed[d] {
			return Targets{}, fmt.Errorf("hand-off refused, nothing removed: [%d]: %s is not among the %d images the collector listed", i, img.ImageID, len(collected))
		}
		r, err := imageref.Parse(d)
		if err != nil {
			return Targets{}, fmt.Errorf("hand-off refused, nothing removed: [%d]: %w", i, err)
		}
		t.Handed = append(t.Handed, r)
	}
	return t, nil
}

// signalDone tells the collector, then the scanner if there is one, that
// removal is over. The scanner is signalled only when --scanner says one
// runs; its endpoint may already be gone (a custom scanner that removed it
// early), which is not an error.
func (c *Command) signalDone(log *slog.Logger) {
	// A peer that waits reads at once; one that died must not keep the
	// remover from exiting.
	bound := time.Minute
	if c.HandoffTimeout > 0 {
		bound = min(bound, max(c.HandoffTimeout, time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := c.Transport.SignalCompletion(ctx, handoff.Path(c.SharedDir, handoff.EraseCompleteCollect)); err != nil {
		log.Error("could not tell the collector that removal finished", "error", err)
	}
	if c.Scanner != ScannerEnabled {
		return
	}
	err := c.Transport.SignalCompletion(ctx, handoff.Path(c.SharedDir, handoff.EraseCompleteScan))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("the scanner's completion endpoint is gone; nothing to signal")
	case err != nil:
		log.Error("could not tell the scanner that removal finished", "error", err)
	}
}
