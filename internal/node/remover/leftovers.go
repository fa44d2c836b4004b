package remover

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/reclaim"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// LeftoverFlags are the remover's flags for what removals left behind.
type LeftoverFlags struct {
	// Find looks for leftovers after the removals.
	Find bool
	// Reclaim and Namespaces are the policy: the kinds to reclaim, and
	// the other namespaces whose images may go.
	Reclaim, Namespaces string
	// LeaseAge and RecordAge keep work in progress from being taken for
	// leftovers (reclaim.Ages).
	LeaseAge, RecordAge time.Duration
	// CRIORunRoot is CRI-O's run root, where containers/storage records
	// which layers are mounted; reclaiming on CRI-O reads it.
	CRIORunRoot string
	// MinLeaseAge is the least LeaseAge with which old-lease is reclaimed:
	// the worker's is the configuration's least leaseAge (workerdefaults.MinLeaseAge),
	// a pull under way being older; "eraser node prune", run by hand on a
	// node whose pulls its operator knows, takes any. Listing takes any.
	MinLeaseAge time.Duration
	// CRIOHostRoot is where the node's CRI-O configuration and pulls'
	// directory are seen (reclaim.CRIOStore.HostRoot).
	CRIOHostRoot string
}

// Bind registers the flags.
func (f *LeftoverFlags) Bind(fs *flag.FlagSet) {
	fs.BoolVar(&f.Find, "find-leftovers", true, "after the removals, look for what removals left on the runtime (containerd's and CRI-O's own records) and report it")
	fs.StringVar(&f.Reclaim, "reclaim", "", "comma-separated kinds of leftover to delete ("+strings.Join(kindNames(), ", ")+"); empty: report them only")
	fs.StringVar(&f.Namespaces, "reclaim-namespaces", "", "comma-separated containerd namespaces besides k8s.io whose images --reclaim=other-namespace may delete")
	fs.DurationVar(&f.LeaseAge, "lease-age", reclaim.DefaultAges.Lease, "a lease of containerd's own pull and import clients older than this is one a killed client left (old-lease); the remover reclaims old-lease only with at least "+workerdefaults.MinLeaseAge.String())
	fs.StringVar(&f.CRIORunRoot, "crio-run-root", workerdefaults.CRIORunRoot, "CRI-O's run root (crio.conf's runroot), where its storage records which layers are mounted; read when reclaiming on CRI-O")
	fs.StringVar(&f.CRIOHostRoot, "crio-host-root", "", "where the node's /etc/crio, /etc/containers and /var/tmp are seen (read-only), which say how CRI-O's store is set up and whether a pull is under way; empty: at their own paths. Read when reclaiming on CRI-O")
	fs.DurationVar(&f.RecordAge, "record-age", reclaim.DefaultAges.Record, "CRI-O's records younger than this are not judged (a pull in progress)")
}

// Ages are the margins the flags set.
func (f LeftoverFlags) Ages() reclaim.Ages {
	return reclaim.Ages{Lease: f.LeaseAge, Record: f.RecordAge}
}

func kindNames() []string {
	var out []string
	for _, k := range leftoverkind.Reclaimable {
		out = append(out, string(k))
	}
	return out
}

// Leftovers builds the run's step that finds and reclaims leftovers on
// the node of client, protected as removals are; nil when off.
// measure reads the image filesystem where the run sees it (MeasureFreed),
// nil where not: what the sweep of containerd's stores frees is told by it.
func (f LeftoverFlags) Leftovers(client *cri.Client, imageStore string, measure func(context.Context) (retention.Disk, error)) (func(ctx context.Context, p protect.Policy, dryRun bool, read *containerdrecords.Records) ([]reclaim.Result, error), error) {
	kinds, err := reclaim.ParseKinds(f.Reclaim)
	if err != nil {
		return nil, fmt.Errorf("--reclaim: %w", err)
	}
	if kinds[leftoverkind.OldLease] && f.LeaseAge < f.MinLeaseAge {
		return nil, fmt.Errorf("--lease-age %s: reclaiming old-lease takes at least %s, as a pull under way holds its lease that long", f.LeaseAge, f.MinLeaseAge)
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
	return func(ctx context.Context, p protect.Policy, dryRun bool, read *containerdrecords.Records) ([]reclaim.Result, error) {
		found, err := search(read, f.Ages(), time.Now(), func(now time.Time) ([]leftover.Leftover, error) {
			return reclaim.Find(ctx, client, imageStore, f.Ages(), now)
		})
		if err != nil {
			return nil, err
		}
		policy := reclaim.Policy{Kinds: kinds, Namespaces: namespaces, Protect: p, LeaseAge: f.LeaseAge,
			CRIO: reclaim.CRIOStore{GraphRoot: imageStore, RunRoot: f.CRIORunRoot, HostRoot: f.CRIOHostRoot, RecordAge: f.RecordAge}}
		if measure != nil {
			policy.ImageFsUsed = func(ctx context.Context) (uint64, error) {
				d, err := measure(ctx)
				return d.Used(), err
			}
		}
		return reclaim.Run(ctx, client, client, found, policy, dryRun), nil
	}, nil
}

// search finds the leftovers in containerd's records the run read after
// its removals, when it did, else through a reading of its own (find).
func search(read *containerdrecords.Records, ages reclaim.Ages, now time.Time, find func(now time.Time) ([]leftover.Leftover, error)) ([]leftover.Leftover, error) {
	if read != nil {
		return reclaim.InContainerd(*read, ages, now), nil
	}
	return find(now)
}

// leftovers runs the step and logs each leftover as a result line, for the
// node's report; read is containerd's records as read after the removals,
// or nil.
func leftovers(ctx context.Context, opts Options, policy protect.Policy, read *containerdrecords.Records) *workerresult.Leftovers {
	if opts.Leftovers == nil {
		return nil
	}
	results, err := opts.Leftovers(ctx, policy, opts.DryRun, read)
	if err != nil {
		opts.Log.Warn("could not look for what removals left on the runtime", "error", err)
		return &workerresult.Leftovers{Error: err.Error()}
	}
	return tally(ctx, opts.Log, results)
}

// tally logs each result as a result line, for the node's report, and
// totals them.
func tally(ctx context.Context, log *slog.Logger, results []reclaim.Result) *workerresult.Leftovers {
	out := &workerresult.Leftovers{}
	for _, r := range results {
		// Unknown bytes are not 0: the line carries none, its detail says why.
		line := nodereport.Line{Outcome: string(r.Outcome), Target: r.Name, Leftover: string(r.Kind), Bytes: r.Bytes, BytesKnown: !r.BytesUnknown,
			Detail: strings.TrimPrefix(r.Why+"; "+r.Detail, "; "), Namespace: r.Namespace}
		level := slog.LevelInfo
		if r.Outcome == reclaim.Failed {
			level = slog.LevelError
		}
		line.Log(ctx, log, level)
		switch {
		case r.Name == reclaim.SweptStores && r.Outcome == reclaim.Reclaimed:
			// Not a leftover: what the sweep freed beyond those listed.
			out.SweptBytes += r.Bytes
			out.ReclaimedBytes += r.Bytes
			out.SweptUnknown = out.SweptUnknown || r.BytesUnknown
		case r.Outcome == reclaim.Gone:
			// Something else deleted it: neither left nor reclaimed.
		case r.Outcome == reclaim.Reclaimed || r.Outcome == reclaim.WouldReclaim:
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
