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
	"os"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/exclusion"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/node/remover"
	"github.com/eraser-oss/eraser/internal/node/worker"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

const usage = `usage: eraser node list  [--runtime-endpoint URL] [--exclude-file FILE]... [--leftovers [--image-store DIR] [--lease-age D] [--record-age D]] [-o table|json]
       eraser node prune [--runtime-endpoint URL] [--exclude-file FILE]... [--images LIST] [--dry-run] [--concurrency N]
                         [--min-age D] [--unused-for D] [--high-threshold-percent N --low-threshold-percent M]
                         [--imagefs-path DIR] [--image-store DIR] [--state-dir DIR] [--now RFC3339] [-o table|json]

list   shows every image on the node and whether it would be kept, and why;
       with --leftovers, what removals left on the runtime instead (containerd:
       images named only by their ID, images of other namespaces, old leases,
       content and snapshots nothing holds; CRI-O: layers nothing holds,
       incomplete layers, the storage of containers it no longer lists),
       each with the bytes only it holds.
prune  removes images: --images is a comma-separated list of references,
       digests or IDs, or "*" for every unprotected image at least
       --min-age old; --unused-for and the thresholds apply the retention
       policies of a scheduled run (docs/retention.md). One of them is
       required.
Exclusion files use upstream Eraser's format: {"excluded": ["docker.io/library/*", ...]}.

Exit status: 0 done; 1 could not run (runtime, files); 2 usage; 3 removals
failed; 4 an --images entry is not an image reference (nothing failed).
`

// Exit codes of "eraser node" (docs/cli.md), a command a person runs: they
// are not the node workers' (workerresult.Exit*), whose failed removals
// exit 2.
const (
	ExitOK           = 0
	ExitCouldNotRun  = 1
	ExitUsage        = 2
	ExitPruneFailed  = 3
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
	var leftovers bool
	var imageStore string
	ages := reclaim.DefaultAges
	if sub == "list" {
		fs.BoolVar(&leftovers, "leftovers", false, "show what removals left on the runtime, not the images")
		fs.StringVar(&imageStore, "image-store", DefaultImageStore, "CRI-O's image store (containers/storage's root), read by --leftovers")
		fs.DurationVar(&ages.Lease, "lease-age", ages.Lease, "with --leftovers, a containerd lease older than this holds a leftover")
		fs.DurationVar(&ages.Record, "record-age", ages.Record, "with --leftovers, CRI-O's records younger than this are not judged (a pull in progress)")
	}
	if sub == "prune" {
		fs.StringVar(&images, "images", "", `comma-separated images to remove, or "*" for every unprotected image`)
		fs.BoolVar(&o.dryRun, "dry-run", false, "show what would be removed, remove nothing")
		fs.IntVar(&o.concurrency, "concurrency", remover.DefaultConcurrency, "removals in flight at once")
		o.retention.Bind(fs, podpaths.StateDir(worker.NodeOS))
		o.protection.Bind(fs)
		o.leftover.Bind(fs)
		o.registry.Bind(fs)
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
		p, notes, err := exclusion.ReadFile(f)
		if err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return ExitCouldNotRun
		}
		for _, n := range notes {
			fmt.Fprintln(stderr, "warning:", n)
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
	if sub == "list" && leftovers {
		if err := listLeftovers(ctx, client, imageStore, ages, o.json, time.Now(), stdout); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return ExitCouldNotRun
		}
		return ExitOK
	}
	if sub == "list" {
		if err := list(ctx, client, o.policy, o.json, stdout); err != nil {
			fmt.Fprintln(stderr, "error:", err)
			return ExitCouldNotRun
		}
		return ExitOK
	}
	return prune(ctx, client, o, stdout, stderr)
}

// defaultEndpoint is containerd's: its socket on Linux, its named pipe on
// Windows (the node's path, where the worker pod's is a mount).
func defaultEndpoint() string {
	if e := os.Getenv(cri.EnvRuntimeEndpoint); e != "" {
		return e
	}
	if worker.NodeOS == podpaths.Windows {
		return cri.DefaultEndpoint
	}
	return "unix:///run/containerd/containerd.sock"
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

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

func shortID(s string) string {
	if h, ok := strings.CutPrefix(s, "sha256:"); ok && len(h) == 64 {
		return "sha256:" + h[:12]
	}
	return s
}
