// Package reclaim finds what image removals left behind on a node's
// runtime and deletes the kinds the operator opted into, by the runtime's
// own deletion path, each re-checked right before its deletion as
// removals are: never what a container uses, a running pull's lease
// holds, the runtime pins or an exclusion protects.
package reclaim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/criorecords"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// CRINamespace is containerd's namespace of the kubelet's images.
const CRINamespace = "k8s.io"

// ParseKinds reads a comma-separated list of kinds to reclaim.
func ParseKinds(list string) (map[leftoverkind.Kind]bool, error) {
	out := map[leftoverkind.Kind]bool{}
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !slices.Contains(leftoverkind.Reclaimable, leftoverkind.Kind(k)) {
			return nil, fmt.Errorf("%q is not a kind of leftover that can be reclaimed (want %s)", k, kindList())
		}
		out[leftoverkind.Kind(k)] = true
	}
	return out, nil
}

func kindList() string {
	var s []string
	for _, k := range leftoverkind.Reclaimable {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// Policy is what the operator opted into.
type Policy struct {
	// Kinds are reclaimed; others are listed.
	Kinds map[leftoverkind.Kind]bool
	// Namespaces are the namespaces besides the kubelet's where images
	// and leases may be reclaimed: another namespace is someone's (Docker's
	// moby, BuildKit's buildkit), and only its name here lets its images
	// and its forgotten pull and import leases go.
	Namespaces map[string]bool
	// Protect keeps what a removal keeps: exclusions, sandbox images.
	Protect protect.Policy
	// LeaseAge is the age past which a lease holds a leftover.
	LeaseAge time.Duration
	// CRIO is where CRI-O's store is, on a CRI-O node.
	CRIO CRIOStore
	// ImageFsUsed reads the image filesystem's used bytes, where the
	// worker sees it, to tell what the sweep of containerd's stores frees
	// (SweptStores); nil: not seen, and that is not known.
	ImageFsUsed func(ctx context.Context) (uint64, error)
}

// CRIOStore is CRI-O's containers/storage store: its image store (the
// graph root) and its run root, where the store keeps what lasts until
// the node restarts (which layers are mounted).
type CRIOStore struct {
	GraphRoot, RunRoot string
	// Driver is the store's storage driver; empty: the one whose records
	// are in GraphRoot.
	Driver string
	// HostRoot is where the worker sees the node's files that say how
	// CRI-O's store is set up and whether a pull is under way (its pod
	// mounts them under it read-only); empty: at their own paths.
	HostRoot string
	// StorageConf and CRIOConf are the node's storage.conf and crio.conf,
	// under HostRoot; empty: DefaultStorageConf (or the file
	// containers/storage falls back to) and DefaultCRIOConf.
	StorageConf, CRIOConf string
	// RecordAge: while a layer a pull could have written is younger, no
	// layer nothing holds is deleted (Ages.Record).
	RecordAge time.Duration
}

// Outcome is what became of a leftover.
type Outcome string

const (
	// Found: listed, not reclaimed (its kind is off, or a dry run).
	Found Outcome = "leftover"
	// WouldReclaim: a dry run's leftover the policy would reclaim.
	WouldReclaim Outcome = "would reclaim"
	Reclaimed    Outcome = "reclaimed"
	// Kept: the re-check before its deletion found it protected, or
	// changed since the node was read.
	Kept Outcome = "kept"
	// Gone: something else deleted it between the reading and its
	// deletion; none of its bytes were freed by the reclaim.
	Gone   Outcome = "gone"
	Failed Outcome = "failed"
)

// Result is one leftover and what became of it.
type Result struct {
	leftover.Leftover
	Outcome Outcome
	Detail  string
	// BytesUnknown: what its deletion freed is not known (Bytes is 0, not
	// a measure).
	BytesUnknown bool
}

// Ages are the margins that keep work in progress from being taken for
// leftovers.
type Ages struct {
	// Lease: a lease of containerd's own pull and import clients younger
	// than this is a pull's or an import's under way.
	Lease time.Duration
	// Record: CRI-O's records younger than this may be a pull's.
	Record time.Duration
}

// DefaultAges are the ages a remover given no flag uses, the
// configuration's defaults.
var DefaultAges = Ages{Lease: workerdefaults.LeaseAge, Record: workerdefaults.RecordAge}

// Find reads the runtime's own records: containerd's through its CRI
// endpoint (containerd's own API too: its unix socket, or its named pipe on
// Windows), CRI-O's from its image store, with the containers and
// sandboxes its CRI lists.
func Find(ctx context.Context, client *cri.Client, imageStore string, ages Ages, now time.Time) ([]leftover.Leftover, error) {
	switch client.RuntimeName {
	case "containerd":
		records, err := containerdrecords.Read(ctx, client.Address)
		if err != nil {
			return nil, err
		}
		return InContainerd(records, ages, now), nil
	case "cri-o":
		if imageStore == "" {
			return nil, fmt.Errorf("finding leftovers on CRI-O needs its image store")
		}
		records, err := criorecords.Read(imageStore)
		if err != nil {
			return nil, err
		}
		live, err := liveIDs(ctx, client)
		if err != nil {
			return nil, err
		}
		// Tenants write the layers measured: the walks share a budget, past
		// which a layer counts what was measured of it.
		measure, cancel := context.WithTimeout(ctx, measureBudget)
		defer cancel()
		sizeOf := func(layer string) int64 {
			n, _ := criorecords.LayerDiskBytes(measure, imageStore, records.Driver, layer)
			return n
		}
		return leftover.CRIO(records, leftover.CRIOOptions{Live: live, SizeOf: sizeOf, MinAge: ages.Record, Now: now}), nil
	default:
		return nil, fmt.Errorf("finding leftovers on %s is not supported (containerd and CRI-O)", client.RuntimeName)
	}
}

// measureBudget bounds the time Find spends measuring CRI-O's layers.
const measureBudget = time.Minute

// InContainerd finds the leftovers in containerd's records already read:
// a remover judges the reading it took after its removals rather than
// read every namespace again. Reclaiming re-reads each leftover before
// its deletion, so records a few seconds old decide nothing alone.
func InContainerd(records containerdrecords.Records, ages Ages, now time.Time) []leftover.Leftover {
	return leftover.Containerd(records, leftover.Options{CRINamespace: CRINamespace, LeaseAge: ages.Lease, Now: now})
}

// liveIDs are the containers and pod sandboxes CRI-O lists.
func liveIDs(ctx context.Context, rt Runtime) (map[string]bool, error) {
	containers, err := rt.ListContainers(ctx)
	if err != nil {
		return nil, err
	}
	sandboxes, err := rt.PodSandboxIDs(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, c := range containers {
		live[c.ID] = true
	}
	for _, id := range sandboxes {
		live[id] = true
	}
	return live, nil
}

// Decide splits the leftovers into those the policy takes and the results
// of those it lists only.
func Decide(found []leftover.Leftover, p Policy) (take []leftover.Leftover, listed []Result) {
	for _, l := range found {
		switch {
		case !p.Kinds[l.Kind]:
			listed = append(listed, Result{Leftover: l, Outcome: Found})
		case !p.inScope(l):
			listed = append(listed, Result{Leftover: l, Outcome: Found, Detail: "namespace " + l.Namespace + " is not named for reclaiming"})
		default:
			take = append(take, l)
		}
	}
	return take, listed
}

// inScope tells a leftover of a namespace reclaim may act in: the
// kubelet's, or one the policy names. Content is every namespace's and
// CRI-O has none: their leftovers have no namespace. What containerd's
// garbage collector removes by its own rules (unreferenced) is not the
// policy's to scope: a collection of any namespace's makes it.
func (p Policy) inScope(l leftover.Leftover) bool {
	switch l.Kind {
	case leftoverkind.OtherNamespace, leftoverkind.OldLease:
		return l.Namespace == CRINamespace || p.Namespaces[l.Namespace]
	default:
		return true
	}
}

// Runtime is the part of the CRI client a re-check reads.
type Runtime interface {
	ListContainers(ctx context.Context) ([]cri.Container, error)
	PodSandboxIDs(ctx context.Context) ([]string, error)
}

// Run reclaims what the policy takes of the leftovers found on the node
// of client, and lists the rest; rt (the client, or a proxy of it) is
// what the re-checks list containers through. A dry run deletes nothing.
func Run(ctx context.Context, client *cri.Client, rt Runtime, found []leftover.Leftover, p Policy, dryRun bool) []Result {
	take, out := Decide(found, p)
	// Reclaiming unreferenced leftovers also sweeps containerd's stores of
	// what no record names, which no listing finds: it runs whenever the
	// policy names the kind.
	if len(take) == 0 && (!p.Kinds[leftoverkind.Unreferenced] || dryRun || client.RuntimeName != "containerd") {
		return out
	}
	switch {
	case client.RuntimeName == "cri-o":
		store := p.CRIO
		if store.Driver == "" {
			driver, err := criorecords.Driver(store.GraphRoot)
			if err != nil {
				for _, l := range take {
					out = append(out, Result{Leftover: l, Outcome: Failed, Detail: err.Error()})
				}
				return out
			}
			store.Driver = driver
		}
		return append(out, reclaimCRIO(ctx, store, p.Kinds, rt, take, dryRun)...)
	case client.RuntimeName != "containerd":
		for _, l := range take {
			out = append(out, Result{Leftover: l, Outcome: Found, Detail: "reclaiming is done on containerd and CRI-O"})
		}
		return out
	}
	return append(out, reclaimContainerd(ctx, client.Address, rt, take, p, dryRun)...)
}

// Totals count the results by outcome, and the bytes of each.
type Totals struct {
	Count map[Outcome]int
	Bytes map[Outcome]uint64
}

// Sum totals results.
func Sum(results []Result) Totals {
	t := Totals{Count: map[Outcome]int{}, Bytes: map[Outcome]uint64{}}
	for _, r := range results {
		t.Count[r.Outcome]++
		t.Bytes[r.Outcome] += r.Bytes
	}
	return t
}
