// Package nodecmd is "eraser node": the workers' logic in one process against
// a runtime endpoint, with no cluster. It lists a node's images with what
// protects each, and prunes them, for debugging and for nodes outside
// Kubernetes.
package nodecmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/eraser-oss/eraser/internal/cli/bytesize"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/exclusion"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

const usage = `usage: eraser node list  [--runtime-endpoint URL] [--exclude-file FILE]... [-o table|json]
       eraser node prune [--runtime-endpoint URL] [--exclude-file FILE]... [--images LIST] [--dry-run] [--concurrency N]
                         [--min-age D] [--unused-for D] [--high-threshold-percent N --low-threshold-percent M]
                         [--imagefs-path DIR] [--image-store DIR] [--state-dir DIR] [--now RFC3339] [-o table|json]

list   shows every image on the node and whether it would be kept, and why.
prune  removes images: --images is a comma-separated list of references,
       digests or IDs, or "*" for every unprotected image at least
       --min-age old; --unused-for and the thresholds apply the retention
       policies of a scheduled run (docs/retention.md). One of them is
       required.
Exclusion files use upstream Eraser's format: {"excluded": ["docker.io/library/*", ...]}.

Exit status: 0 done; 1 could not run (runtime, files); 2 usage; 3 removals
failed; 4 an --images entry is not an image reference (nothing failed).
`

// Exit codes of "eraser node" (docs/cli.md).
const (
	ExitOK           = 0
	ExitCouldNotRun  = 1
	ExitUsage        = 2
	ExitRemovalsFail = 3
	ExitInvalidEntry = 4
)

// Main runs "eraser node ARGS..." and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "prune") {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	sub := args[0]
	fs := flag.NewFlagSet("eraser node "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("runtime-endpoint", defaultEndpoint(), "CRI endpoint (env "+cri.EnvRuntimeEndpoint+")")
	var excludeFiles multi
	fs.Var(&excludeFiles, "exclude-file", "exclusion list file (repeatable)")
	output := fs.String("o", "table", "output: table or json")
	var o pruneOptions
	var images string
	if sub == "prune" {
		fs.StringVar(&images, "images", "", `comma-separated images to remove, or "*" for every unprotected image`)
		fs.BoolVar(&o.dryRun, "dry-run", false, "show what would be removed, remove nothing")
		fs.IntVar(&o.concurrency, "concurrency", remover.DefaultConcurrency, "removals in flight at once")
		o.retention.Bind(fs, podpaths.StateDir(worker.NodeOS))
		o.protection.Bind(fs)
	}
	err := fs.Parse(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		return ExitUsage
	}
	if *output != "table" && *output != "json" {
		fmt.Fprintf(stderr, "error: -o %q: want table or json\n", *output)
		return ExitUsage
	}
	o.json = *output == "json"
	if sub == "prune" {
		if code := o.prepare(images, stderr); code != ExitOK {
			return code
		}
	}
	var pats []imageref.Pattern
	for _, f := range excludeFiles {
		p, err := exclusion.ReadFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return ExitCouldNotRun
		}
		pats = append(pats, p...)
	}
	client, err := cri.Dial(ctx, *endpoint, cri.DefaultTimeouts)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return ExitCouldNotRun
	}
	defer client.Close()
	o.policy = protect.Policy{Exclusions: pats}
	if sub == "list" {
		if err := list(ctx, client, o.policy, o.json, stdout); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return ExitCouldNotRun
		}
		return ExitOK
	}
	return prune(ctx, client, o, stdout, stderr)
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

func defaultEndpoint() string {
	if e := os.Getenv(cri.EnvRuntimeEndpoint); e != "" {
		return e
	}
	return "unix:///run/containerd/containerd.sock"
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func list(ctx context.Context, client *cri.Client, policy protect.Policy, asJSON bool, out io.Writer) error {
	snap, err := remover.ReadNode(ctx, client, policy)
	if err != nil {
		return err
	}
	order := make([]int, len(snap.Images))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return firstName(snap.Images[order[a]]) < firstName(snap.Images[order[b]]) })
	if asJSON {
		listed := make([]ListedImage, 0, len(order))
		for _, i := range order {
			img, v := snap.Images[i], snap.Verdict(i)
			verdict := "removable"
			if v.Reason != protect.Removable {
				verdict = string(v.Reason)
			}
			listed = append(listed, ListedImage{ID: img.ID, Names: nonNil(img.Tags), Digests: nonNil(img.Digests), Size: img.Size, Verdict: verdict, Detail: v.Detail})
		}
		return writeJSON(out, listed)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE ID\tNAMES\tSIZE\tVERDICT\tWHY")
	for _, i := range order {
		img := snap.Images[i]
		v := snap.Verdict(i)
		verdict, why := "removable", "-"
		if v.Reason != protect.Removable {
			verdict, why = "keep: "+string(v.Reason), v.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shortID(img.ID), names(img), bytesize.Format(img.Size), verdict, why)
	}
	return tw.Flush()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// pruneOptions are prune's flags.
type pruneOptions struct {
	policy      protect.Policy
	entries     []string
	dryRun      bool
	concurrency int
	retention   retention.Flags
	protection  remover.ProtectionFlags
	now         time.Time
	json        bool
}

// ListedImage is one image in "list -o json".
type ListedImage struct {
	ID      string   `json:"id"`
	Names   []string `json:"names"`
	Digests []string `json:"digests"`
	Size    uint64   `json:"size"`
	// Verdict is "removable" or why the image is kept: "in use", "pinned",
	// "excluded".
	Verdict string `json:"verdict"`
	Detail  string `json:"detail,omitempty"`
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
		ImageStore: o.retention.ImageStore, MeasureDisk: remover.ImageFsMeter(client, o.retention.ImageFsPath),
	}
	o.protection.Apply(&opts)
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
		if s.Counts[string(remover.Failed)] > 0 {
			return ExitRemovalsFail
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
	for _, o := range remover.Outcomes {
		if n := s.Counts[string(o)]; n > 0 {
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
	}
	return nil
}

func firstName(img cri.Image) string {
	if len(img.Tags) > 0 {
		return img.Tags[0]
	}
	return "~" + img.ID
}

func names(img cri.Image) string {
	if len(img.Tags) == 0 {
		return "<none>"
	}
	return strings.Join(img.Tags, ",")
}

func shortID(s string) string {
	if h, ok := strings.CutPrefix(s, "sha256:"); ok && len(h) == 64 {
		return "sha256:" + h[:12]
	}
	return s
}
