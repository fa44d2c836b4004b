// Package nodecmd is "eraser node": the workers' logic in one process against
// a runtime endpoint, with no cluster. It lists a node's images with what
// protects each, and prunes them, for debugging and for nodes outside
// Kubernetes.
package nodecmd

import (
	"context"
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

	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/exclusion"
	"github.com/eraser-oss/eraser/internal/imageref"
	"github.com/eraser-oss/eraser/internal/paths"
	"github.com/eraser-oss/eraser/internal/protect"
	"github.com/eraser-oss/eraser/internal/remover"
	"github.com/eraser-oss/eraser/internal/retention"
	"github.com/eraser-oss/eraser/internal/worker"
)

const usage = `usage: eraser node list  [--runtime-endpoint URL] [--exclude-file FILE]...
       eraser node prune [--runtime-endpoint URL] [--exclude-file FILE]... [--images LIST] [--dry-run] [--concurrency N]
                         [--min-age D] [--unused-for D] [--high-threshold-percent N --low-threshold-percent M]
                         [--imagefs-path DIR] [--state-dir DIR] [--now RFC3339]

list   shows every image on the node and whether it would be kept, and why.
prune  removes images: --images is a comma-separated list of references,
       digests or IDs, or "*" for every unprotected image at least
       --min-age old; --unused-for and the thresholds apply the retention
       policies of a scheduled run (docs/retention.md). One of them is
       required.
Exclusion files use upstream Eraser's format: {"excluded": ["docker.io/library/*", ...]}.
`

// Main runs "eraser node ARGS..." and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "prune") {
		fmt.Fprint(stderr, usage)
		return 2
	}
	sub := args[0]
	fs := flag.NewFlagSet("eraser node "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("runtime-endpoint", defaultEndpoint(), "CRI endpoint (env "+cri.EnvRuntimeEndpoint+")")
	var excludeFiles multi
	fs.Var(&excludeFiles, "exclude-file", "exclusion list file (repeatable)")
	images := fs.String("images", "", "prune (required): comma-separated images to remove, or * for every unprotected image")
	dryRun := fs.Bool("dry-run", false, "prune: show what would be removed, remove nothing")
	concurrency := fs.Int("concurrency", remover.DefaultConcurrency, "prune: removals in flight at once")
	var ret retention.Flags
	ret.Bind(fs, paths.StateDir(worker.NodeOS))
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if sub == "prune" && *images == "" && !ret.Choosing() {
		// Nothing is removed by default: "*" or a policy has to be asked for.
		fmt.Fprintln(stderr, `error: prune needs --images (a list of images, or "*" for every unused, unprotected image), --unused-for, or the thresholds`)
		return 2
	}
	if err := ret.Validate(); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	now, err := ret.Clock()
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 2
	}
	var pats []imageref.Pattern
	for _, f := range excludeFiles {
		p, err := exclusion.ReadFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return 1
		}
		pats = append(pats, p...)
	}
	client, err := cri.Dial(ctx, *endpoint, cri.DefaultTimeouts)
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	defer client.Close()
	policy := protect.Policy{Exclusions: pats}
	if sub == "list" {
		err = list(ctx, client, policy, stdout)
	} else {
		var entries []string
		if *images != "" {
			entries = strings.Split(*images, ",")
		}
		err = prune(ctx, client, pruneOptions{policy: policy, entries: entries, dryRun: *dryRun, concurrency: *concurrency, retention: ret, now: now}, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
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

func list(ctx context.Context, client *cri.Client, policy protect.Policy, out io.Writer) error {
	snap, err := remover.ReadNode(ctx, client, policy)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE ID\tNAMES\tSIZE\tVERDICT\tWHY")
	order := make([]int, len(snap.Images))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return firstName(snap.Images[order[a]]) < firstName(snap.Images[order[b]]) })
	for _, i := range order {
		img := snap.Images[i]
		v := snap.Verdict(i)
		verdict, why := "removable", "-"
		if v.Reason != protect.Removable {
			verdict, why = "keep: "+string(v.Reason), v.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", shortID(img.ID), names(img), humanBytes(img.Size), verdict, why)
	}
	return tw.Flush()
}

// pruneOptions are prune's flags.
type pruneOptions struct {
	policy      protect.Policy
	entries     []string
	dryRun      bool
	concurrency int
	retention   retention.Flags
	now         time.Time
}

func prune(ctx context.Context, client *cri.Client, o pruneOptions, out, errOut io.Writer) error {
	dryRun := o.dryRun
	targets, invalid := remover.ParseTargets(o.entries)
	if o.retention.Choosing() {
		// As a scheduled run: the policies choose among every image.
		images, err := client.ListImages(ctx)
		if err != nil {
			return err
		}
		targets.Scheduled = true
		for _, img := range images {
			targets.Collected = append(targets.Collected, img.ID)
		}
	}
	start := time.Now()
	var mu sync.Mutex
	last := time.Time{}
	progress := func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < time.Second && done < total {
			return
		}
		last = time.Now()
		fmt.Fprintf(errOut, "\r%d/%d images processed (%s)", done, total, time.Since(start).Round(100*time.Millisecond))
		if done == total {
			fmt.Fprintln(errOut)
		}
	}
	info := &remover.RunInfo{}
	results, err := remover.Run(ctx, client, targets, remover.Options{
		Policy: o.policy, DryRun: dryRun, Concurrency: o.concurrency,
		Log: slog.New(slog.DiscardHandler), Progress: progress, Info: info,
		Retention: o.retention.Settings, Now: o.now, StateDir: o.retention.StateDir,
		MeasureDisk: remover.ImageFsMeter(client, o.retention.ImageFsPath),
	})
	if err != nil {
		return err
	}
	results = append(invalid, results...)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", shortID(r.Target), strings.Join(r.Names, ","), r.Outcome, pol, humanBytes(r.Bytes), detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := remover.Summarize(results, dryRun)
	info.Apply(&s)
	verb := "freed"
	if dryRun {
		verb = "would free"
	}
	var parts []string
	for _, o := range remover.Outcomes {
		if n := s.Counts[string(o)]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	fmt.Fprintf(out, "\n%s; %s %s in %s\n", strings.Join(parts, ", "), verb, humanBytes(s.BytesFreed), time.Since(start).Round(time.Millisecond))
	for _, p := range retention.Policies {
		if t, ok := s.RemovedBy[string(p)]; ok {
			fmt.Fprintf(out, "  %s: %d images, %s\n", p, t.Images, humanBytes(t.Bytes))
		}
	}
	if fs := s.ImageFs; fs != nil && fs.CapacityBytes > 0 {
		fmt.Fprintf(out, "image filesystem: %.1f%% used before, %.1f%% after (of %s)\n",
			float64(fs.UsedBeforeBytes)*100/float64(fs.CapacityBytes), float64(fs.UsedAfterBytes)*100/float64(fs.CapacityBytes), humanBytes(fs.CapacityBytes))
	}
	return remover.NodeOutcome(s)
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

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
