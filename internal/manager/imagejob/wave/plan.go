package wave

import (
	"fmt"
	"maps"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// CreateFailure is a node whose pod the API server refused (or did not
// answer for). It is retried with backoff until the start timeout, counted
// from the first refusal, ends it: a pod that cannot be created is a pod
// that did not start.
type CreateFailure struct {
	First, Next time.Time
	Attempts    int
	Message     string
	// Admission is whether the last attempt's pod was created and then
	// refused by the node's kubelet (NotAdmitted) rather than by the API
	// server.
	Admission bool
}

// Backoff between attempts to create one node's pod: 1s doubling to 30s.
// A refusal is often for good (Pod Security, a missing PriorityClass) and
// retrying it every pass only floods the API server and the log.
const (
	createBackoffMin = time.Second
	createBackoffMax = 30 * time.Second
)

// CreateBound is how long a node's pod creation is retried when the start
// timeout is off (0): the refusal must still end the node.
const CreateBound = 10 * time.Minute

// Refused records one more failed attempt at creating a node's pod.
func Refused(prev CreateFailure, had bool, now time.Time, message string) CreateFailure {
	f := prev
	if !had {
		f = CreateFailure{First: now}
	}
	f.Attempts++
	f.Message = message
	f.Admission = false
	wait := createBackoffMin << min(f.Attempts-1, 5)
	f.Next = now.Add(min(wait, createBackoffMax))
	return f
}

// Unadmitted records one more pod of a node that its kubelet refused at
// admission (podspec.NotAdmitted): retried with the same backoff, within
// the same bound, as a pod the API server refused.
func Unadmitted(prev CreateFailure, had bool, now time.Time, message string) CreateFailure {
	f := Refused(prev, had, now, message)
	f.Admission = true
	return f
}

// Wave is the next set of pods to create.
type Wave struct {
	// Create are indexes into the targets, in order.
	Create []int
	// From is the cursor the wave began at: creations below it are of
	// nodes that waited.
	From int
	// Started is the cursor once every pod of the wave exists.
	Started int
	// Failed are nodes ended without a pod: deleted, or whose pod could not
	// be created in time.
	Failed map[string]eraserv1.NodeFailure
	// Waiting are the reached nodes left without a pod because another run
	// holds them or is queued for them first, with that run.
	Waiting map[string]string
	// AtBound is whether the bound on worker pods in flight stopped the
	// wave short.
	AtBound bool
	// Wake is when a node waiting out a creation backoff is due.
	Wake time.Time
}

// plan picks the next wave: first the nodes that waited for another run,
// as they come free, then targets from the cursor on, while fewer than the
// limit have a live pod and the bound on pods in flight leaves headroom. A
// node another run holds is passed and waits.
func plan(w Snapshot, o Observation) Wave {
	pl := newPlanner(w, o)
	pl.retake()
	pl.extend()
	return pl.wave
}

// planner is one plan under way: the wave so far, and what it may still
// take.
type planner struct {
	w    Snapshot
	wave Wave
	// active counts the nodes with a live pod, against limit.
	active, limit int
	// headroom is what the bound on pods in flight still lets the wave
	// create; -1 is no bound.
	headroom int
	// createBound is how long a pod's creation is retried before its node
	// fails.
	createBound time.Duration
}

func newPlanner(w Snapshot, o Observation) *planner {
	pl := &planner{
		w:      w,
		wave:   Wave{From: o.Started, Started: o.Started, Failed: map[string]eraserv1.NodeFailure{}, Waiting: map[string]string{}},
		active: o.Active, limit: w.Limit, headroom: -1, createBound: w.Timeouts.Start,
	}
	if pl.limit <= 0 {
		pl.limit = len(w.Targets)
	}
	if w.Bounded {
		pl.headroom = w.Headroom
	}
	if w.HeldBy == nil {
		pl.w.HeldBy = func(string) string { return "" }
	}
	if pl.createBound <= 0 {
		pl.createBound = CreateBound
	}
	return pl
}

// retake goes over the reached nodes that wait for their pod: each is
// taken as it comes free, or waits on.
func (pl *planner) retake() {
	w, p := pl.w, &pl.wave
	for i, target := range w.Targets[:min(p.From, len(w.Targets))] {
		name := target.Name
		if !Waits(w, name) {
			continue
		}
		switch {
		case !w.Nodes[name]:
			p.Failed[name] = eraserv1.NodeFailure{Node: name, Reason: eraserv1.ReasonNodeDeleted, Message: "the node was deleted before its pod was created"}
		case w.Halted || pl.full():
			// Over the budget the waiting nodes are never started: they
			// count as untouched. Paused, they wait for the resume.
			p.Waiting[name] = ""
		case w.HeldBy(name) != "":
			pl.wait(name, w.HeldBy(name))
		case !pl.creatable(name):
			if _, failed := p.Failed[name]; !failed {
				p.Waiting[name] = ""
			}
		default:
			pl.take(i)
		}
	}
}

// extend moves the cursor on over the targets while the wave is not full.
func (pl *planner) extend() {
	w, p := pl.w, &pl.wave
	for p.Started < len(w.Targets) && !pl.full() {
		name := w.Targets[p.Started].Name
		if f, recorded := w.Failures[name]; recorded && w.Pods[name] == nil {
			// Ended before a rewind of the cursor (a later refusal).
			p.Failed[name] = f
			p.Started++
			continue
		}
		if w.Pods[name] != nil {
			// Created before (the cursor was held back by a refusal): sending
			// it again could be refused by admission before AlreadyExists.
			if !podspec.Finished(w.Pods[name]) {
				pl.active++
			}
			p.Started++
			continue
		}
		if !w.Nodes[name] {
			p.Failed[name] = eraserv1.NodeFailure{Node: name, Reason: eraserv1.ReasonNodeDeleted, Message: "the node was deleted before its pod was created"}
			p.Started++
			continue
		}
		if h := w.HeldBy(name); h != "" {
			pl.wait(name, h)
			p.Started++
			continue
		}
		if _, retried := w.Creating[name]; retried && !pl.creatable(name) {
			if _, failed := p.Failed[name]; failed {
				p.Started++
				continue
			}
			// The wave waits here, so that the cursor never passes a node
			// without a pod, a failure or a wait.
			break
		}
		pl.take(p.Started)
		p.Started++
	}
}

// wait leaves a node held by another run waiting, or gives it up when its
// wait stalled longer than the bound.
func (pl *planner) wait(name, holder string) {
	w, p := pl.w, &pl.wave
	if s, ok := stallOf(w, name); ok && w.Timeouts.Wait > 0 {
		msg, due, out := gaveUp(holder, s, w.Timeouts.Wait, w.Now)
		if out {
			p.Failed[name] = eraserv1.NodeFailure{Node: name, Reason: eraserv1.ReasonWaitTimedOut, Message: msg}
			return
		}
		p.Wake = earliest(p.Wake, due)
	}
	p.Waiting[name] = holder
}

// full says whether the wave may take no more nodes, and records when the
// bound is why.
func (pl *planner) full() bool {
	if pl.w.Paused {
		return true
	}
	if pl.headroom == 0 {
		pl.wave.AtBound = true
	}
	return pl.active >= pl.limit || pl.headroom == 0
}

// take adds the i-th target to the wave.
func (pl *planner) take(i int) {
	pl.wave.Create = append(pl.wave.Create, i)
	pl.active++
	if pl.headroom > 0 {
		pl.headroom--
	}
}

// creatable says whether the node's pod may be sent now, and fails a node
// whose creation was retried for too long.
func (pl *planner) creatable(name string) bool {
	w, p := pl.w, &pl.wave
	cf, ok := w.Creating[name]
	if !ok {
		return true
	}
	if !w.Now.Before(cf.First.Add(pl.createBound)) {
		f := eraserv1.NodeFailure{Node: name, Reason: eraserv1.ReasonCreateFailed,
			Message: textcut.Cut(fmt.Sprintf("the pod could not be created in %v (%d attempts): %s", pl.createBound, cf.Attempts, cf.Message), MaxMessage)}
		if cf.Admission {
			f.Reason = eraserv1.ReasonNotAdmitted
			f.Message = textcut.Cut(fmt.Sprintf("the node's kubelet refused the pod at admission for %v (%d attempts, each pod recreated with backoff): %s", pl.createBound, cf.Attempts, cf.Message), MaxMessage)
		}
		p.Failed[name] = f
		return false
	}
	if w.Now.Before(cf.Next) {
		p.Wake = earliest(p.Wake, cf.Next)
		return false
	}
	return true
}

func stallOf(w Snapshot, node string) (Stall, bool) {
	if w.Stall == nil {
		return Stall{}, false
	}
	return w.Stall(node)
}

// Waits is whether a reached node waits for its pod: on record as waiting,
// with no pod shown or pending and no failure.
func Waits(w Snapshot, node string) bool {
	if !w.Waiting[node] || w.Pods[node] != nil || w.Pending[node] {
		return false
	}
	_, failed := w.Failures[node]
	return !failed
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// Advance is the snapshot once the wave's creations are known: the cursor
// stops at the first node whose pod could not be created, so that it is
// retried, and a node that waited and could not be created waits on;
// created pods are pending until the cache shows them, nodes ended without
// a pod are failures on record, and the wave's waiting nodes wait.
func Advance(w Snapshot, p Wave, errs []error) Snapshot {
	end := p.Started
	next := w
	next.Waiting = map[string]bool{}
	for node := range p.Waiting {
		next.Waiting[node] = true
	}
	for k, i := range p.Create {
		if errs[k] == nil {
			continue
		}
		if i < p.From {
			next.Waiting[w.Targets[i].Name] = true
			continue
		}
		end = i
		break
	}
	next.Started = end
	next.Failures = maps.Clone(w.Failures)
	maps.Copy(next.Failures, p.Failed)
	next.Pending = maps.Clone(w.Pending)
	for k, i := range p.Create {
		if errs[k] == nil {
			next.Pending[w.Targets[i].Name] = true
		}
	}
	return next
}

// WakeUp is when the job needs a pass that no event will bring: a pod's
// timeout, or a node's creation backoff. Pod events drive the rest. The
// snapshot is the one after the wave (advance).
func WakeUp(w Snapshot, o Observation, p Wave) time.Duration {
	next := o.Next
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	earliest(p.Wake)
	for node, cf := range w.Creating {
		if w.Pods[node] != nil || w.Pending[node] {
			// Its pod exists (a kubelet's refusal is kept while the
			// next pod waits to be admitted): nothing to retry.
			continue
		}
		earliest(cf.Next)
	}
	if len(p.Waiting) > 0 || p.AtBound {
		// A worker that ends wakes the queued jobs (podEvents); this bounds
		// the wait should its event have come before this job queued.
		earliest(w.Now.Add(queueRecheck))
	}
	if len(p.Create) > 0 && w.Timeouts.Start > 0 {
		earliest(w.Now.Add(w.Timeouts.Start))
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(w.Now), time.Second)
}

// queueRecheck is the longest a queued job waits between passes.
const queueRecheck = 10 * time.Second

// Next is the wave a pass creates: the plan over the targets the canary
// and the failure budget let the waves reach. The snapshot carries the
// queue's word on each node (HeldBy) and the room under the bound on pods
// in flight (Headroom, Bounded).
func Next(w Snapshot, o Observation, budget *config.MaxConcurrent) Wave {
	return plan(limitTargets(w, canaryLimit(o.Progress, w.Limit, budget)), o)
}
