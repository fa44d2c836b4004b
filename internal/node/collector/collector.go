// Package collector is the first worker of a scheduled run: it lists the
// node's images, drops every protected one, and hands the rest to the
// scanner, or straight to the remover when scanning is disabled.
package collector

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/handoff"
	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Command is the collector binary.
type Command struct {
	worker.Flags
	ScanDisabled bool
	SummaryFile  string
	// Retention takes the remover's retention flags: the collector keeps
	// the node's state file, and the pod passes both workers the same.
	Retention retention.Flags
}

// Bind registers the collector's flags.
func (c *Command) Bind(fs *flag.FlagSet) {
	c.Flags.Bind(fs)
	fs.BoolVar(&c.ScanDisabled, "scan-disabled", false, "hand images straight to the remover: every unused image is removed")
	fs.StringVar(&c.SummaryFile, "summary-file", remover.DefaultSummaryFile, "where to write the JSON summary (the termination message)")
	c.Retention.Bind(fs, podpaths.StateDir(worker.NodeOS))
}

// Run runs the collector and returns the exit code.
func (c *Command) Run(ctx context.Context) int {
	log := c.Start("collector")
	summary, err := c.run(ctx, log)
	return worker.Finish(log, c.SummaryFile, summary, err)
}

func (c *Command) run(ctx context.Context, log *slog.Logger) (workerresult.Summary, error) {
	summary := workerresult.Summary{Component: "collector", Counts: map[string]int{}}
	if err := c.Retention.Validate(); err != nil {
		return summary, err
	}
	now, err := c.Retention.Clock()
	if err != nil {
		return summary, err
	}
	pats, err := c.Exclusions(log)
	if err != nil {
		return summary, err
	}
	client, err := c.Dial(ctx, log)
	if err != nil {
		return summary, err
	}
	snap, err := remover.ReadNode(ctx, client, protect.Policy{Exclusions: pats})
	if err == nil {
		// The containers seen now are the use the node's history keeps:
		// by the time the remover reads the node, a short job's may be
		// gone. Ages are the remover's to judge: the runtime's record times
		// are not read twice.
		var save func() error
		noTimes := func() (map[string]time.Time, error) { return nil, nil }
		if _, _, save, err = remover.NodeAges(snap, noTimes, c.Retention.StateDir, c.Retention.StateLockWait, now); err == nil {
			err = save()
			// Counted in the node's removal ledger; the remover reports them.
			remover.LogReturns(log, snap.Returned)
		}
	}
	_ = client.Close()
	retry := false
	if nodestate.DiskFull(err) {
		// Stopping here would remove nothing exactly when the disk needs
		// it: the removals go first, and this reading is saved after them.
		log.Warn("the node's disk is full: its state is saved after the removals", "error", err)
		retry, err = true, nil
	}
	if err != nil {
		return summary, err
	}
	if snap.SandboxGuessed {
		log.Warn("keeping every image that looks like a pause image", "reason", snap.SandboxNote)
		summary.SandboxImageGuessed = true
	}
	payload := Payload(snap)
	for i := range snap.Images {
		if v := snap.Verdict(i); v.Reason != protect.Removable {
			summary.Counts[string(v.Reason)]++
			nodereport.Line{Outcome: string(v.Reason), Target: snap.Images[i].ID, Image: snap.Images[i].ID, Names: snap.Images[i].Tags, Detail: v.Detail}.Log(ctx, log, slog.LevelInfo)
		}
	}
	summary.Counts["candidates"] = len(payload)

	// Publish the endpoint we wait on before handing anything over: the
	// remover may finish and signal before a later publish would happen.
	done, err := c.Transport.PublishCompletion(handoff.Path(c.SharedDir, handoff.EraseCompleteCollect))
	if err != nil {
		return summary, err
	}
	defer done.Close()
	dest := handoff.CollectScan
	if c.ScanDisabled {
		dest = handoff.ScanErase
	}
	// The record goes first: the remover checks what it receives against it.
	if err := handoff.WriteCollected(c.SharedDir, payload); err != nil {
		return summary, err
	}
	log.Info("handing over candidates", "candidates", len(payload), "to", dest, "kept", summary.Counts)
	taker := "scanner"
	if c.ScanDisabled {
		taker = "remover"
	}
	err = c.WaitFor(ctx, "(the "+taker+" never read them)", "nobody took the images", func(ctx context.Context) error {
		return c.Transport.SendImages(ctx, handoff.Path(c.SharedDir, dest), payload)
	})
	if err != nil {
		return summary, err
	}
	if err := c.WaitFor(ctx, "remover", "no completion signal from the", done.Wait); err != nil {
		return summary, err
	}
	log.Info("removal finished")
	if retry {
		if err := remover.Reobserve(snap, c.Retention.StateDir, c.Retention.StateLockWait, now); err != nil {
			return summary, fmt.Errorf("saving the node's state after the removals (the disk was full before them): %w", err)
		}
		log.Info("the node's state was saved after the removals")
	}
	return summary, nil
}

// Payload lists the unprotected images in the hand-off form: digests are the
// part after "@" of each repo digest, as upstream sends them.
func Payload(s *remover.Snapshot) []handoff.Image {
	out := []handoff.Image{}
	for _, i := range s.Candidates() {
		img := s.Images[i]
		digests := make([]string, 0, len(img.Digests))
		for _, d := range img.Digests {
			if _, dig, ok := strings.Cut(d, "@"); ok {
				digests = append(digests, dig)
			}
		}
		names := img.Tags
		if names == nil {
			names = []string{}
		}
		out = append(out, handoff.Image{ImageID: img.ID, Names: names, Digests: digests})
	}
	return out
}
