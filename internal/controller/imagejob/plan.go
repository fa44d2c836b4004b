package imagejob

import (
	"fmt"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/podspec"
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
	// started is the cursor once every pod of the wave exists.
	started int
	// failed are nodes ended without a pod: deleted, or whose pod could not
	// be created in time.
	failed map[string]eraserv1.NodeFailure
	// wake is when a node waiting out a creation backoff is due.
	wake time.Time
}

// plan picks the next wave: targets from the cursor on, while fewer than
// the limit have a live pod. It is pure.
func plan(w world, o observation) wave {
	p := wave{started: o.started, failed: map[string]eraserv1.NodeFailure{}}
	active := o.active
	limit := w.limit
	if limit <= 0 {
		limit = len(w.targets)
	}
	bound := w.timeouts.start
	if bound <= 0 {
		bound = createBound
	}
	for p.started < len(w.targets) && active < limit {
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
		if cf, ok := w.creating[name]; ok {
			if !w.now.Before(cf.first.Add(bound)) {
				p.failed[name] = eraserv1.NodeFailure{Node: name, Reason: ReasonCreateFailed,
					Message: truncate(fmt.Sprintf("the pod could not be created in %v (%d attempts): %s", bound, cf.attempts, cf.message))}
				p.started++
				continue
			}
			if w.now.Before(cf.next) {
				// The wave waits here, so that the cursor never passes a node
				// without a pod or a failure.
				p.wake = cf.next
				break
			}
		}
		p.create = append(p.create, p.started)
		p.started++
		active++
	}
	return p
}
