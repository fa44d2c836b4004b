package imagejob

import (
	"fmt"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// createFailure is a node whose pod the API server refused (or did not
// answer for). It is retried with backoff until the start timeout, counted
// from the first refusal, ends it: a pod that cannot be created is a pod
// that did not start.
type createFailure struct {
	first, next time.Time
	attempts    int
	message     string
}

// Backoff between attempts to create one node's pod: 1s doubling to 30s.
// A refusal is often for good (Pod Security, a missing PriorityClass) and
// retrying it every pass only floods the API server and the log.
const (
	createBackoffMin = time.Second
	createBackoffMax = 30 * time.Second
)

// createBound is how long a node's pod creation is retried when the start
// timeout is off (0): the refusal must still end the node.
const createBound = 10 * time.Minute

// refused records one more failed attempt at creating a node's pod.
func refused(prev createFailure, had bool, now time.Time, message string) createFailure {
	f := prev
	if !had {
		f = createFailure{first: now}
	}
	f.attempts++
	f.message = message
	wait := createBackoffMin << min(f.attempts-1, 5)
	f.next = now.Add(min(wait, createBackoffMax))
	return f
}

// wave is the next set of pods to create.
type wave struct {
	// create are indexes into the targets, in order.
	create []int
	// from is the cursor the wave began at: creations below it are of
	// nodes that waited.
	from int
	// started is the cursor once every pod of the wave exists.
	started int
	// failed are nodes ended without a pod: deleted, or whose pod could not
	// be created in time.
	failed map[string]eraserv1.NodeFailure
	// waiting are the reached nodes left without a pod because another run
	// holds them or is queued for them first, with that run.
	waiting map[string]string
	// starved is whether the bound on worker pods in flight stopped the
	// wave short.
	starved bool
	// wake is when a node waiting out a creation backoff is due.
	wake time.Time
}

// plan picks the next wave: first the nodes that waited for another run,
// as they come free, then targets from the cursor on, while fewer than the
// limit have a live pod and the bound on pods in flight leaves room. A node
// another run holds is passed and waits. It is pure.
func plan(w world, o observation) wave {
	p := wave{from: o.started, started: o.started, failed: map[string]eraserv1.NodeFailure{}, waiting: map[string]string{}}
	active := o.active
	limit := w.limit
	if limit <= 0 {
		limit = len(w.targets)
	}
	left := -1
	if w.bounded {
		left = w.room
	}
	if w.holder == nil {
		w.holder = func(string) string { return "" }
	}
	// wait leaves a node held by another run waiting, or gives it up when
	// its wait stalled longer than the bound.
	wait := func(name, holder string) {
		if s, ok := stallOf(w, name); ok && w.timeouts.wait > 0 {
			msg, due, out := gaveUp(holder, s, w.timeouts.wait, w.now)
			if out {
				p.failed[name] = eraserv1.NodeFailure{Node: name, Reason: ReasonWaitTimedOut, Message: msg}
				return
			}
			p.wake = earliest(p.wake, due)
		}
		p.waiting[name] = holder
	}
	full := func() bool {
		if left == 0 {
			p.starved = true
		}
		return active >= limit || left == 0
	}
	take := func(i int) {
		p.create = append(p.create, i)
		active++
		if left > 0 {
			left--
		}
	}
	bound := w.timeouts.start
	if bound <= 0 {
		bound = createBound
	}
	// creatable says whether the node's pod may be sent now, and fails a
	// node whose creation was retried for too long.
	creatable := func(name string) bool {
		cf, ok := w.creating[name]
		if !ok {
			return true
		}
		if !w.now.Before(cf.first.Add(bound)) {
			p.failed[name] = eraserv1.NodeFailure{Node: name, Reason: ReasonCreateFailed,
				Message: truncate(fmt.Sprintf("the pod could not be created in %v (%d attempts): %s", bound, cf.attempts, cf.message))}
			return false
		}
		if w.now.Before(cf.next) {
			p.wake = earliest(p.wake, cf.next)
			return false
		}
		return true
	}
	for i, target := range w.targets[:min(o.started, len(w.targets))] {
		name := target.Name
		if !waits(w, name) {
			continue
		}
		switch {
		case !w.nodes[name]:
			p.failed[name] = eraserv1.NodeFailure{Node: name, Reason: ReasonNodeDeleted, Message: "the node was deleted before its pod was created"}
		case w.halted || full():
			// Over the budget the waiting nodes are never started: they
			// count as untouched.
			p.waiting[name] = ""
		case w.holder(name) != "":
			wait(name, w.holder(name))
		case !creatable(name):
			if _, failed := p.failed[name]; !failed {
				p.waiting[name] = ""
			}
		default:
			take(i)
		}
	}
	for p.started < len(w.targets) && !full() {
		name := w.targets[p.started].Name
		if f, recorded := w.failures[name]; recorded && w.pods[name] == nil {
			// Ended before a rewind of the cursor (a later refusal).
			p.failed[name] = f
			p.started++
			continue
		}
		if w.pods[name] != nil {
			// Created before (the cursor was held back by a refusal): sending
			// it again could be refused by admission before AlreadyExists.
			if !podspec.Finished(w.pods[name]) {
				active++
			}
			p.started++
			continue
		}
		if !w.nodes[name] {
			p.failed[name] = eraserv1.NodeFailure{Node: name, Reason: ReasonNodeDeleted, Message: "the node was deleted before its pod was created"}
			p.started++
			continue
		}
		if h := w.holder(name); h != "" {
			wait(name, h)
			p.started++
			continue
		}
		if _, retried := w.creating[name]; retried && !creatable(name) {
			if _, failed := p.failed[name]; failed {
				p.started++
				continue
			}
			// The wave waits here, so that the cursor never passes a node
			// without a pod, a failure or a wait.
			break
		}
		take(p.started)
		p.started++
	}
	return p
}

func stallOf(w world, node string) (stall, bool) {
	if w.stall == nil {
		return stall{}, false
	}
	return w.stall(node)
}

// waits is whether a reached node waits for its pod: on record as waiting,
// with no pod shown or pending and no failure.
func waits(w world, node string) bool {
	if !w.waiting[node] || w.pods[node] != nil || w.pending[node] {
		return false
	}
	_, failed := w.failures[node]
	return !failed
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
