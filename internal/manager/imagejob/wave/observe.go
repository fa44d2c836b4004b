// Package wave holds the pure decisions of a pass over a running ImageJob:
// each reached node judged (Observe, Classify), the next wave chosen (Next:
// the canary and the failure budget's limit (canaryLimit), the node queue's
// headroom and the runs nodes are held by, creation backoff, stalled waits
// given up), the snapshot once the wave is in place (Advance), when the
// next pass is due (WakeUp), and the end of a run with its outcome (Ended,
// Result). It reads nothing: the reconciler gathers a Snapshot and acts on
// what comes back.
package wave

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Snapshot is what one pass knows of a running job: gathered from the cache
// (and, for pods the cache lacks, the API server), then judged by observe
// and plan without further reads.
type Snapshot struct {
	Targets []nodefilter.Target
	// Started is the wave cursor as the status recorded it: the nodes
	// before it have a pod or a failure.
	Started int
	// Pods are the job's pods by node.
	Pods map[string]*corev1.Pod
	// Finished are the outcomes of the finished pods, judged by gather
	// once per pod version.
	Finished map[string]Outcome
	// Pending are nodes whose pod exists although the cache does not show it
	// yet (created by this process a moment ago, or confirmed by a read).
	Pending map[string]bool
	// Missing are nodes whose pod the API server confirmed is gone.
	Missing map[string]bool
	// Nodes that still exist.
	Nodes map[string]bool
	// Failures already on record, by node: the status's and this process's.
	Failures map[string]eraserv1.NodeFailure
	// Creating are nodes whose pod creation failed and is being retried.
	Creating map[string]CreateFailure
	// PodsSeen are when this process saw each unfinished pod begin its
	// timeouts (sight.go).
	PodsSeen map[string]Seen
	Now      time.Time
	Timeouts Timeouts
	// Limit is the most nodes with a live pod at once (maxConcurrentNodes).
	Limit int
	// Waiting are reached nodes that were left waiting for another run
	// (status.waitingIndexes, then each plan's).
	Waiting map[string]bool
	// HeldBy says which run a node must wait for; nil holds none.
	HeldBy nodequeue.HeldByFunc
	// Stall says whether a node's wait cannot end (stall.go); nil never.
	Stall StallFunc
	// Headroom is how many pods the bound on pods in flight lets this pass
	// create, when bounded.
	Headroom int
	Bounded  bool
	// Halted is whether the run is over its failure budget.
	Halted bool
	// Paused is whether the pause switch holds every new pod: the nodes
	// not reached stay so, and those waiting wait on, none given up.
	Paused bool
}

// Observation is the state of a job's nodes at one pass.
type Observation struct {
	Progress
	// NewFailures are the failures first seen in this pass.
	NewFailures map[string]eraserv1.NodeFailure
	// TimedOut pods are deleted once their failure is on record.
	TimedOut []*corev1.Pod
	// Next is the earliest time an active pod times out.
	Next    time.Time
	PerNode map[string]metrics.NodeCounts
}

// Progress tallies a job's nodes.
type Progress struct {
	// Started counts the reached nodes, waiting included.
	Eligible, Started, Active, Succeeded, Failed, Waiting int
	Results                                               eraserv1.ImageResults
	// FreedBytes totals the nodes' figures of the space freed
	// (workerresult.FreedBytes); Reported counts the removers that left a
	// summary, without which the figure is not known.
	FreedBytes int64
	Reported   int
}

// Freed is the job's figure of the space freed, for people ("4.0MiB"), or
// empty while no remover has reported.
func (p Progress) Freed() string {
	if p.Reported == 0 {
		return ""
	}
	return bytesize.FormatSigned(p.FreedBytes)
}

// Observe judges every node the waves have reached. The same
// snapshot gives the same observation.
func Observe(w Snapshot) Observation {
	o := Observation{
		Progress:    Progress{Eligible: len(w.Targets), Started: w.Started},
		NewFailures: map[string]eraserv1.NodeFailure{},
		PerNode:     map[string]metrics.NodeCounts{},
	}
	// Pods created before a crash that the status does not count yet. Only
	// an unbroken run: a node after a gap is created (AlreadyExists) when
	// the wave reaches it.
	for o.Started < o.Eligible && w.Pods[w.Targets[o.Started].Name] != nil {
		o.Started++
	}
	for _, target := range w.Targets[:o.Started] {
		if Waits(w, target.Name) {
			o.Waiting++
			continue
		}
		o.judge(w, target.Name)
	}
	return o
}

// judge adds one started node to the observation.
func (o *Observation) judge(w Snapshot, node string) {
	_, recorded := w.Failures[node]
	pod := w.Pods[node]
	if pod == nil {
		switch {
		case w.Pending[node]:
			o.Active++
		case recorded:
			o.Failed++
			o.outcome(w, node, metrics.NodeCounts{}, metrics.OutcomeFailed)
		case w.Missing[node]:
			o.Failed++
			o.NewFailures[node] = eraserv1.NodeFailure{Node: node, Reason: eraserv1.ReasonPodMissing, Message: "the pod disappeared before it finished"}
			o.outcome(w, node, metrics.NodeCounts{}, metrics.OutcomeFailed)
		default:
			// Neither shown nor confirmed gone: the gather step confirms
			// every such node, so this is a pod created since; wait for it.
			o.Active++
		}
		return
	}
	out, ok := w.Finished[node]
	if !ok {
		out = Classify(pod, w.PodsSeen[node], w.Now, w.Timeouts, w.Nodes[node])
	}
	ended := metrics.OutcomeUnknown
	switch out.State {
	case StateSucceeded:
		o.Succeeded++
		ended = metrics.OutcomeSucceeded
	case StateFailed:
		o.Failed++
		ended = metrics.OutcomeFailed
		if !recorded {
			o.NewFailures[node] = eraserv1.NodeFailure{Node: node, Reason: out.Reason, Message: textcut.Cut(out.Message, MaxMessage)}
		}
		if out.TimedOut {
			o.TimedOut = append(o.TimedOut, pod)
		}
	default:
		o.Active++
		if d := Deadline(pod, w.PodsSeen[node], w.Timeouts); !d.IsZero() && (o.Next.IsZero() || d.Before(o.Next)) {
			o.Next = d
		}
	}
	AddResults(&o.Results, out.Summary)
	if s := out.Summary; s != nil {
		o.FreedBytes += workerresult.FreedBytes(s.BytesFreed, s.Freed)
		o.Reported++
	}
	o.outcome(w, node, out.counts(), ended)
}

// outcome records a node's figures and how its worker ended, for the
// metrics. A node that is gone is not judged: its failure says nothing
// about a node that no longer exists, and ForgetNode dropped its series.
func (o *Observation) outcome(w Snapshot, node string, n metrics.NodeCounts, ended metrics.Outcome) {
	if w.Nodes[node] {
		n.Outcome = ended
	}
	if !n.IsZero() {
		o.PerNode[node] = n
	}
}

// Unconfirmed lists the started nodes whose pod neither the cache shows nor
// anything else explains: the gather step asks the API server about them.
func Unconfirmed(w Snapshot) []string {
	var out []string
	for _, target := range w.Targets[:w.Started] {
		n := target.Name
		if w.Pods[n] == nil && !w.Pending[n] && !w.Waiting[n] {
			if _, recorded := w.Failures[n]; !recorded {
				out = append(out, n)
			}
		}
	}
	return out
}
