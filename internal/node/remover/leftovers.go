package remover

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/process/logging"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// LeftoverFlags are the remover's flags for what removals left behind.
type LeftoverFlags struct {
	// Find looks for leftovers after the removals.
	Find bool
	// Reclaim and Namespaces are the policy: the kinds to reclaim, and
	// the other namespaces whose images may go.
	Reclaim, Namespaces string
	LeaseAge            time.Duration
}

// Bind registers the flags.
func (f *LeftoverFlags) Bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.Find, "find-leftovers", true, "after the removals, look for what removals left on the runtime (containerd's and CRI-O's own records) and report it")
	fs.StringVar(&f.Reclaim, "reclaim", "", "comma-separated kinds of leftover to delete ("+strings.Join(kindNames(), ", ")+"); empty: report them only")
	fs.StringVar(&f.Namespaces, "reclaim-namespaces", "", "comma-separated containerd namespaces besides k8s.io whose images --reclaim=other-namespace may delete")
	fs.DurationVar(&f.LeaseAge, "lease-age", reclaim.DefaultAges.Lease, "a containerd lease older than this holds a leftover; younger, a pull or an import")
}

func kindNames() []string {
	var out []string
	for _, k := range reclaim.Reclaimable {
		out = append(out, string(k))
	}
	return out
}

// Leftovers builds the run's step that finds and reclaims leftovers on
// the node of client, protected as removals are; nil when off.
func (f LeftoverFlags) Leftovers(client *cri.Client, imageStore string) (func(ctx context.Context, p protect.Policy, dryRun bool) ([]reclaim.Result, error), error) {
	kinds, err := reclaim.ParseKinds(f.Reclaim)
	if err != nil {
		return nil, fmt.Errorf("--reclaim: %w", err)
	}
	if !f.Find {
		if len(kinds) > 0 {
			return nil, fmt.Errorf("--reclaim needs --find-leftovers")
		}
		return nil, nil
	}
	namespaces := map[string]bool{}
	for _, ns := range strings.Split(f.Namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces[ns] = true
		}
	}
	return func(ctx context.Context, p protect.Policy, dryRun bool) ([]reclaim.Result, error) {
		ages := reclaim.DefaultAges
		ages.Lease = f.LeaseAge
		found, err := reclaim.Find(ctx, client, imageStore, ages, time.Now())
		if err != nil {
			return nil, err
		}
		policy := reclaim.Policy{Kinds: kinds, Namespaces: namespaces, Protect: p, LeaseAge: f.LeaseAge}
		return reclaim.Run(ctx, client, client, found, policy, dryRun), nil
	}, nil
}

// leftovers runs the step and logs each leftover as a result line, for the
// node's report.
func leftovers(ctx context.Context, opts Options, policy protect.Policy) *workerresult.Leftovers {
	if opts.Leftovers == nil {
		return nil
	}
	results, err := opts.Leftovers(ctx, policy, opts.DryRun)
	if err != nil {
		opts.Log.Warn("could not look for what removals left on the runtime", "error", err)
		return &workerresult.Leftovers{Error: err.Error()}
	}
	out := &workerresult.Leftovers{}
	for _, r := range results {
		attrs := []any{"outcome", string(r.Outcome), "target", r.Name, "leftover", string(r.Kind), "bytes", r.Bytes, "detail", strings.TrimPrefix(r.Why+"; "+r.Detail, "; ")}
		if r.Namespace != "" {
			attrs = append(attrs, "namespace", r.Namespace)
		}
		level := slog.LevelInfo
		if r.Outcome == reclaim.Failed {
			level = slog.LevelError
		}
		opts.Log.Log(ctx, level, logging.ResultMessage, attrs...)
		switch r.Outcome {
		case reclaim.Reclaimed, reclaim.WouldReclaim:
			out.Reclaimed++
			out.ReclaimedBytes += r.Bytes
		default:
			out.Found++
			out.FoundBytes += r.Bytes
			if r.Outcome == reclaim.Failed {
				out.Failed++
			}
		}
	}
	return out
}
