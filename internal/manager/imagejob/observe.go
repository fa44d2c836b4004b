package imagejob

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
)

// world is what one pass knows of a running job: gathered from the cache
// (and, for pods the cache lacks, the API server), then judged by observe
// and plan without further reads.
type world struct {
	targets []nodefilter.Target
	// started is the wave cursor as the status recorded it: the nodes
	// before it have a pod or a failure.
	started int
	// pods are the job's pods by node.
	pods map[string]*corev1.Pod
	// finished are the outcomes of the finished pods, judged by gather
	// once per pod version.
	finished map[string]outcome
	// pending are nodes whose pod exists although the cache does not show it
	// yet (created by this process a moment ago, or confirmed by a read).
	pending map[string]bool
	// missing are nodes whose pod the API server confirmed is gone.
	missing map[string]bool
	// nodes that still exist.
	nodes map[string]bool
	// failures already on record, by node: the status's and this process's.
	failures map[string]eraserv1.NodeFailure
	// creating are nodes whose pod creation failed and is being retried.
	creating map[string]createFailure
	// sights are when this process saw each unfinished pod begin its
	// timeouts (clock.go).
	sights   map[string]sight
	now      time.Time
	timeouts timeouts
	// limit is the most nodes with a live pod at once (maxConcurrentNodes).
	limit int
	// waiting are reached nodes that were left waiting for another run
	// (status.waitingIndexes, then each plan's).
	waiting map[string]bool
	// holder says which run a node must wait for; nil holds none.
	holder holderFunc
	// stall says whether a node's wait cannot end (stall.go); nil never.
	stall stallFunc
	// room is how many pods the bound on pods in flight lets this pass
	// create, when bounded.
	room    int
	bounded bool
	// halted is whether the run is over its failure budget.
	halted bool
}

// observation is the state of a job's nodes at one pass.
type observation struct {
	progress
	// newFailures are the failures first seen in this pass.
	newFailures map[string]eraserv1.NodeFailure
	// timedOut pods are deleted once their failure is on record.
	timedOut []*corev1.Pod
	// next is the earliest time an active pod times out.
	next    time.Time
	perNode map[string]metrics.NodeCounts
}

// observe judges every node the waves have reached. It is pure: the same
// world gives the same observation.
func observe(w world) observation {
	o := observation{
		progress:    progress{eligible: len(w.targets), started: w.started},
		newFailures: map[string]eraserv1.NodeFailure{},
		perNode:     map[string]metrics.NodeCounts{},
	}
	// Pods created before a crash that the status does not count yet. Only
	// an unbroken run: a node after a gap is created (AlreadyExists) when
	// the wave reaches it.
	for o.started < o.eligible && w.pods[w.targets[o.started].Name] != nil {
		o.started++
	}
	for _, target := range w.targets[:o.started] {
		if waits(w, target.Name) {
			o.waiting++
			continue
		}
		o.judge(w, target.Name)
	}
	return o
}

// judge adds one started node to the observation.
func (o *observation) judge(w world, node string) {
	_, recorded := w.failures[node]
	pod := w.pods[node]
	if pod == nil {
		switch {
		case w.pending[node]:
			o.active++
		case recorded:
			o.failed++
			o.outcome(w, node, metrics.NodeCounts{}, metrics.OutcomeFailed)
		case w.missing[node]:
			o.failed++
			o.newFailures[node] = eraserv1.NodeFailure{Node: node, Reason: ReasonPodMissing, Message: "the pod disappeared before it finished"}
			o.outcome(w, node, metrics.NodeCounts{}, metrics.OutcomeFailed)
		default:
			// Neither shown nor confirmed gone: the gather step confirms
			// every such node, so this is a pod created since; wait for it.
			o.active++
		}
		return
	}
	out, ok := w.finished[node]
	if !ok {
		out = classify(pod, w.sights[node], w.now, w.timeouts, w.nodes[node])
	}
	ended := metrics.OutcomeUnknown
	switch out.state {
	case stateSucceeded:
		o.succeeded++
		ended = metrics.OutcomeSucceeded
	case stateFailed:
		o.failed++
		ended = metrics.OutcomeFailed
		if !recorded {
			o.newFailures[node] = eraserv1.NodeFailure{Node: node, Reason: out.reason, Message: truncate(out.message)}
		}
		if out.timedOut {
			o.timedOut = append(o.timedOut, pod)
		}
	default:
		o.active++
		if d := deadline(pod, w.sights[node], w.timeouts); !d.IsZero() && (o.next.IsZero() || d.Before(o.next)) {
			o.next = d
		}
	}
	addResults(&o.results, out.summary)
	o.outcome(w, node, out.counts(), ended)
}

// outcome records a node's figures and how its worker ended, for the
// metrics. A node that is gone is not judged: its failure says nothing
// about a node that no longer exists, and ForgetNode dropped its series.
func (o *observation) outcome(w world, node string, n metrics.NodeCounts, ended metrics.Outcome) {
	if w.nodes[node] {
		n.Outcome = ended
	}
	if !n.IsZero() {
		o.perNode[node] = n
	}
}

// unconfirmed lists the started nodes whose pod neither the cache shows nor
// anything else explains: the gather step asks the API server about them.
func unconfirmed(w world) []string {
	var out []string
	for _, target := range w.targets[:w.started] {
		n := target.Name
		if w.pods[n] == nil && !w.pending[n] && !w.waiting[n] {
			if _, recorded := w.failures[n]; !recorded {
				out = append(out, n)
			}
		}
	}
	return out
}
