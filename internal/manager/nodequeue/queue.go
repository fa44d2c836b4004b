// Package nodequeue is the manager's one worker per node, cluster-wide: the
// runs of every kind share the nodes through its Queue, so that no node
// ever holds two Eraser worker pods at once, and all runs together keep at
// most the bound on pods in flight.
//
// The queue is the manager's memory. What a node holds is read from the
// cache (every unfinished worker pod, by node: Busy); the queue adds the
// pods created a moment ago that the cache does not show yet (claims) and
// the runs waiting for each node, in their order (Rank). A restarted
// manager rebuilds the waits as each running job passes; until then the
// cache alone keeps the exclusion. It needs no API server, so its
// invariant is tested with many callers at once under the race detector.
package nodequeue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Worker is an unfinished worker pod as the queue sees it: the run it
// belongs to.
type Worker struct {
	// Job is the ImageJob's name (the pod's job label).
	Job string
	// Run is the UID of the pod's controller, the ImageJob: an earlier run
	// of the same name holds the node too.
	Run types.UID
}

// Busy is what the queue reads of the cache.
type Busy interface {
	// Busy counts the unfinished worker pods of every run.
	Busy() (int, error)
	// BusyOn lists those on a node.
	BusyOn(node string) ([]Worker, error)
}

// Queue is the memory shared by every job's passes. It locks itself: every
// method takes its lock, and what a wave takes is chosen and recorded under
// one hold of it (Take).
type Queue struct {
	busy Busy
	mu   sync.Mutex
	// claims are nodes whose pod a job created that the cache may not show
	// yet, by node: the job's name.
	claims map[string]string
	// waits are the runs waiting for each node, by node, then job name.
	waits map[string]map[string]Rank
	// parked are jobs that wait for a node or for headroom under the bound:
	// any worker that ends wakes them.
	parked map[string]bool
}

// New is an empty queue over what the cache shows.
func New(busy Busy) *Queue {
	return &Queue{busy: busy, claims: map[string]string{}, waits: map[string]map[string]Rank{}, parked: map[string]bool{}}
}

// Offer is what a wave may take of the nodes: the headroom the bound on pods in
// flight leaves (when Bounded) and, per node, the run it must wait for.
// HeldBy reads the queue: it is valid only inside Take's choose.
type Offer struct {
	Headroom int
	Bounded  bool
	HeldBy   HeldByFunc
}

// Choice is what a wave took: the nodes it creates pods on, those it left
// waiting, and whether the bound stopped it short.
type Choice struct {
	Create, Waiting []string
	AtBound         bool
}

// Take lets one wave of the run (job, its UID run, its rank) choose its
// nodes with the queue held, so that two runs' passes never both take one
// node, and records the choice: the nodes created on are claimed (and no
// longer waited for), the nodes left waiting are waited for in the run's
// rank, and a run that waits for anything sleeps until a worker ends. bound
// is the cluster's bound on pods in flight (0: none). A cache that cannot
// count the pods in flight fails the take, which then records nothing.
func (q *Queue) Take(job string, run types.UID, rank Rank, bound int, choose func(Offer) Choice) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	inFlight, err := q.inFlight()
	if err != nil {
		return err
	}
	s := Offer{HeldBy: q.heldBy(job, run, rank)}
	s.Headroom, s.Bounded = Headroom(bound, inFlight)
	t := choose(s)
	for _, node := range t.Create {
		q.claims[node] = job
		q.unwait(node, job)
	}
	for _, node := range t.Waiting {
		if q.waits[node] == nil {
			q.waits[node] = map[string]Rank{}
		}
		q.waits[node][job] = rank
	}
	if len(t.Waiting) > 0 || t.AtBound {
		q.parked[job] = true
	} else {
		delete(q.parked, job)
	}
	return nil
}

// heldBy is the run's HeldByFunc over the cache's busy pods and the queue.
// Called with the queue held; used only while it is.
func (q *Queue) heldBy(job string, run types.UID, rank Rank) HeldByFunc {
	return func(node string) string {
		if c := q.claims[node]; c != "" && c != job {
			return c
		}
		workers, err := q.busy.BusyOn(node)
		if err != nil {
			// Not synced: a pass never runs before its watches synced; if
			// it did, waiting is the safe answer.
			return "the cache (not synced)"
		}
		for _, w := range workers {
			if w.Job != job || w.Run != run {
				return w.Job
			}
		}
		ahead := ""
		var best Rank
		for name, r := range q.waits[node] {
			if name != job && r.Before(rank) && (ahead == "" || r.Before(best)) {
				ahead, best = name, r
			}
		}
		return ahead
	}
}

// inFlight is the worker pods of every run that are not finished: the
// cache's, and the claims the cache does not show yet. Called held. The
// claims are looked up before the cache is counted: a pod the cache shows
// in between is then counted twice, never not at all, so the bound is
// never passed.
func (q *Queue) inFlight() (int, error) {
	n := 0
	for node, job := range q.claims {
		shown := false
		workers, err := q.busy.BusyOn(node)
		if err != nil {
			return 0, err
		}
		for _, w := range workers {
			shown = shown || w.Job == job
		}
		if !shown {
			n++
		}
	}
	busy, err := q.busy.Busy()
	if err != nil {
		return 0, err
	}
	return n + busy, nil
}

func (q *Queue) unwait(node, job string) {
	if w := q.waits[node]; w != nil {
		delete(w, job)
		if len(w) == 0 {
			delete(q.waits, node)
		}
	}
}

// Release drops a job's claims on nodes: the cache shows their pods, or
// their creation failed, or they were never seen in time.
func (q *Queue) Release(job string, nodes ...string) {
	if len(nodes) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, node := range nodes {
		if q.claims[node] == job {
			delete(q.claims, node)
		}
	}
}

// Leave forgets a job: it finished or is gone, and neither holds nor waits
// for any node any more.
func (q *Queue) Leave(job string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for node, j := range q.claims {
		if j == job {
			delete(q.claims, node)
		}
	}
	for node := range q.waits {
		q.unwait(node, job)
	}
	delete(q.parked, job)
}

// Wakeable are the jobs to wake when a worker ends.
func (q *Queue) Wakeable() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.parked))
	for job := range q.parked {
		out = append(out, job)
	}
	return out
}
