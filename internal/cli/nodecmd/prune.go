package nodecmd

// "eraser node prune": the remover's removals, by list or by the retention
// policies, against the node's runtime.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// pruneOptions are prune's flags.
type pruneOptions struct {
	policy      protect.Policy
	entries     []string
	dryRun      bool
	concurrency int
	retention   retention.Flags
	protection  protect.Flags
	leftover    remover.LeftoverFlags
	registry    remover.RegistryFlags
	now         time.Time
	json        bool
}

// prepare checks prune's flags and reads its entries.
func (o *pruneOptions) prepare(images string, stderr io.Writer) int {
	if images == "" && !o.retention.Choosing() {
		// Nothing is removed by default: "*" or a policy has to be asked for.
		fmt.Fprintln(stderr, `error: prune needs --images (a list of images, or "*" for every unused, unprotected image), --unused-for, or the thresholds`)
		return ExitUsage
	}
	if err := o.retention.Validate(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return ExitUsage
	}
	now, err := o.retention.Clock()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return ExitUsage
	}
	o.now = now
	if images != "" {
		o.entries = strings.Split(images, ",")
	}
	return ExitOK
}

// PruneOutput is "prune -o json": every target's or image's outcome, and
// the summary a remover would leave.
type PruneOutput struct {
	Results []PrunedImage        `json:"results"`
	Summary workerresult.Summary `json:"summary"`
}

// PrunedImage is one outcome in "prune -o json".
type PrunedImage struct {
	Target  string   `json:"target"`
	ImageID string   `json:"imageId,omitempty"`
	Names   []string `json:"names"`
	Outcome string   `json:"outcome"`
	Policy  string   `json:"policy,omitempty"`
	Bytes   uint64   `json:"bytes"`
	Detail  string   `json:"detail,omitempty"`
}

// prune runs the removals and prints their outcomes; it returns the exit
// code: removals that failed come first, then invalid entries.
func prune(ctx context.Context, client *cri.Client, o pruneOptions, out, errOut io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(errOut, "error:", err)
		return ExitCouldNotRun
	}
	targets, invalid := remover.ParseTargets(o.entries)
	if o.retention.Choosing() {
		// As a scheduled run: the policies choose among every image.
		images, err := client.ListImages(ctx)
		if err != nil {
			return fail(err)
		}
		targets.Scheduled = true
		for _, img := range images {
			targets.Collected = append(targets.Collected, img.ID)
		}
	}
	start := time.Now()
	info := &remover.RunInfo{}
	opts := remover.Options{
		Policy: o.policy, DryRun: o.dryRun, Concurrency: o.concurrency,
		Log: slog.New(slog.DiscardHandler), Progress: progressTo(errOut, start), Info: info,
		Retention: o.retention.Settings, Now: o.now, StateDir: o.retention.StateDir, StateLockWait: o.retention.StateLockWait,
		ImageStore: o.retention.ImageStore, MeasureDisk: remover.ImageFsMeter(client, o.retention.ImageFsPath), Protection: o.protection,
	}
	remover.SetFreedMeters(&opts, client, o.retention.ImageFsPath, o.retention.ImageStore, true)
	var err error
	if opts.Registry, err = o.registry.Settings(); err != nil {
		return fail(err)
	}
	if opts.Leftovers, err = o.leftover.Leftovers(client, o.retention.ImageStore, opts.MeasureFreed); err != nil {
		return fail(err)
	}
	results, err := remover.Run(ctx, client, targets, opts)
	if err != nil {
		return fail(err)
	}
	results = append(invalid, results...)
	s := remover.Summarize(results, o.dryRun)
	info.Apply(&s)
	if o.json {
		err = writeJSON(out, pruneOutput(results, s))
	} else {
		err = printPrune(out, results, s, time.Since(start))
	}
	if err != nil {
		return fail(err)
	}
	if err := errors.Join(remover.NodeOutcome(s), info.StateErr, info.DiskErr); err != nil {
		fmt.Fprintln(errOut, "error:", err)
		if s.Count(workerresult.Failed) > 0 {
			return ExitPruneFailed
		}
		return ExitCouldNotRun
	}
	if len(invalid) > 0 {
		fmt.Fprintf(errOut, "error: %d --images entries are not image references; nothing was removed for them\n", len(invalid))
		return ExitInvalidEntry
	}
	return ExitOK
}

// progressTo reports progress on w at most once a second.
func progressTo(w io.Writer, start time.Time) func(done, total int) {
	var mu sync.Mutex
	last := time.Time{}
	return func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < time.Second && done < total {
			return
		}
		last = time.Now()
		fmt.Fprintf(w, "\r%d/%d images processed (%s)", done, total, time.Since(start).Round(100*time.Millisecond))
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

func pruneOutput(results []remover.Result, s workerresult.Summary) PruneOutput {
	out := PruneOutput{Results: make([]PrunedImage, 0, len(results)), Summary: s}
	for _, r := range results {
		out.Results = append(out.Results, PrunedImage{Target: r.Target, ImageID: r.ImageID, Names: nonNil(r.Names),
			Outcome: string(r.Outcome), Policy: string(r.Policy), Bytes: r.Bytes, Detail: r.Detail})
	}
	return out
}

func printPrune(out io.Writer, results []remover.Result, s workerresult.Summary, took time.Duration) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tNAMES\tOUTCOME\tPOLICY\tSIZE\tDETAIL")
	for _, r := range results {
		detail, pol := r.Detail, string(r.Policy)
		if detail == "" {
			detail = "-"
		}
		if pol == "" {
			pol = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", shortID(r.Target), strings.Join(r.Names, ","), r.Outcome, pol, bytesize.Format(r.Bytes), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verb := "freed"
	if s.DryRun {
		verb = "would free"
	}
	var parts []string
	for _, o := range workerresult.Outcomes {
		if n := s.Count(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	fmt.Fprintf(out, "\n%s; %s %s in %s\n", strings.Join(parts, ", "), verb, bytesize.Format(s.BytesFreed), took.Round(time.Millisecond))
	for _, p := range retention.Policies {
		if t, ok := s.RemovedBy[string(p)]; ok {
			fmt.Fprintf(out, "  %s: %d images, %s\n", p, t.Images, bytesize.Format(t.Bytes))
		}
	}
	if fs := s.ImageFs; fs != nil && fs.CapacityBytes > 0 {
		fmt.Fprintf(out, "image filesystem: %.1f%% used before, %.1f%% after (of %s)\n",
			float64(fs.UsedBeforeBytes)*100/float64(fs.CapacityBytes), float64(fs.UsedAfterBytes)*100/float64(fs.CapacityBytes), bytesize.Format(fs.CapacityBytes))
		if line := fs.Relief(); line != "" {
			fmt.Fprintln(out, line)
		}
	}
	if f := s.Freed; f != nil {
		// The images' sizes above count a layer once per image; this is
		// each layer once, and what the disk really gained.
		line := fmt.Sprintf("the removed images' own content: %s", bytesize.Format(f.ExpectedBytes))
		if f.MeasuredBy != "" {
			where := "the image filesystem"
			if f.MeasuredBy == remover.MeasuredByRuntime {
				where = "the runtime's records"
			}
			line += fmt.Sprintf("; %s gained %s", where, bytesize.FormatSigned(f.MeasuredBytes))
		}
		fmt.Fprintln(out, line)
		if f.Note != "" {
			fmt.Fprintln(out, "  "+f.Note)
		}
		if f.Error != "" {
			fmt.Fprintln(out, "  not measured: "+f.Error)
		}
	}
	printRegret(out, s.Regret)
	if l := s.Leftovers; l != nil {
		verb := "reclaimed"
		if s.DryRun {
			verb = "would reclaim"
		}
		switch {
		case l.Error != "":
			fmt.Fprintln(out, "leftovers not looked for: "+l.Error)
		case l.Found+l.Reclaimed > 0:
			fmt.Fprintf(out, "leftovers of removals on the runtime: %s %d (%s), %d left (%s; eraser node list --leftovers)\n",
				verb, l.Reclaimed, bytesize.Format(l.ReclaimedBytes), l.Found, bytesize.Format(l.FoundBytes))
		}
		switch {
		case l.SweptUnknown:
			fmt.Fprintln(out, "containerd's stores swept of what no record names: what that freed is not known (the image filesystem could not be measured)")
		case l.SweptBytes > 0:
			fmt.Fprintf(out, "containerd's stores swept of what no record names: %s freed\n", bytesize.Format(l.SweptBytes))
		}
	}
	return nil
}

// printRegret tells what came back of earlier removals, by the node's
// removal ledger.
func printRegret(out io.Writer, r *workerresult.Regret) {
	if r == nil || r.Returns == 0 {
		return
	}
	fmt.Fprintf(out, "came back after earlier removals: %d images, %s pulled again\n", r.Returns, bytesize.Format(r.BytesReturned))
	for _, p := range retention.Policies {
		if t, ok := r.ByPolicy[string(p)]; ok {
			fmt.Fprintf(out, "  removed by %s: %d images, %s\n", p, t.Returns, bytesize.Format(t.Bytes))
		}
	}
	for _, e := range r.Recent {
		name := e.Repository
		if name == "" {
			name = shortID(e.Image)
		}
		fmt.Fprintf(out, "  %s: removed %s, back %s later\n", name, e.RemovedAt.Format(time.RFC3339), e.ReturnedAt.Sub(e.RemovedAt).Round(time.Second))
	}
}
