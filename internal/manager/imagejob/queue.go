// One worker per node, cluster-wide: the runs of every kind share the
// nodes through this queue, so that no node ever holds two Eraser worker
// pods at once, and all runs together keep at most maxWorkerPods in flight.
//
// The queue is this process's memory. What a node holds is read from the
// cache (every unfinished worker pod, indexed by node); the queue adds the
// pods created a moment ago that the cache does not show yet (claims) and
// the runs waiting for each node, in their order (ImageList runs before
// scheduled ones, then the earlier run first). A restarted manager rebuilds
// the waits as each running job passes; until then the cache alone keeps the
// exclusion.

package imagejob

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// runRank orders the runs that wait for one node. It is pure.
type runRank struct {
	// scheduled runs (the collector's, hours of scanning) go after
	// ImageLists: a list that names a vulnerable image must not wait
	// behind them on a node both want.
	scheduled bool
	created   time.Time
	name      string
}

// before is whether a goes first.
func (a runRank) before(b runRank) bool {
	if a.scheduled != b.scheduled {
		return !a.scheduled
	}
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return a.name < b.name
}

func rankOf(job *eraserv1.ImageJob, kind podspec.Kind) runRank {
	return runRank{scheduled: kind == podspec.KindCollector, created: job.CreationTimestamp.Time, name: job.Name}
}

// nodeQueue is the memory shared by every job's passes.
type nodeQueue struct {
	mu sync.Mutex
	// claims are nodes whose pod a job created that the cache may not show
	// yet, by node: the job's name.
	claims map[string]string
	// waits are the runs waiting for each node, by node, then job name.
	waits map[string]map[string]runRank
	// sleepers are jobs that wait for a node or for room under the bound:
	// any worker that ends wakes them.
	sleepers map[string]bool
}

func newNodeQueue() *nodeQueue {
	return &nodeQueue{claims: map[string]string{}, waits: map[string]map[string]runRank{}, sleepers: map[string]bool{}}
}

// holderFunc answers, for a node of this job, the run it must wait for:
// another run's worker on it, or a run queued for it first. Empty is free.
type holderFunc func(node string) string

// holder builds the job's holderFunc over the cache's busy pods. Call with
// the queue locked and use it before unlocking.
func (q *nodeQueue) holder(stores *cacheopts.Stores, job *eraserv1.ImageJob, rank runRank) holderFunc {
	return func(node string) string {
		if c := q.claims[node]; c != "" && c != job.Name {
			return c
		}
		pods, err := stores.BusyOn(node)
		if err != nil {
			// Not synced: a pass never runs before its watches synced; if
			// it did, waiting is the safe answer.
			return "the cache (not synced)"
		}
		for _, pod := range pods {
			if name := pod.Labels[podspec.LabelJob]; name != job.Name || !jobdata.SameRun(pod, job.UID) {
				return name
			}
		}
		ahead := ""
		var best runRank
		for name, r := range q.waits[node] {
			if name != job.Name && r.before(rank) && (ahead == "" || r.before(best)) {
				ahead, best = name, r
			}
		}
		return ahead
	}
}

// inFlight is the worker pods of every run that are not finished: the
// cache's, and the claims the cache does not show yet. Call locked.
func (q *nodeQueue) inFlight(stores *cacheopts.Stores) (int, error) {
	n, err := stores.Busy()
	if err != nil {
		return 0, err
	}
	for node, job := range q.claims {
		shown := false
		pods, err := stores.BusyOn(node)
		if err != nil {
			return 0, err
		}
		for _, pod := range pods {
			shown = shown || pod.Labels[podspec.LabelJob] == job
		}
		if !shown {
			n++
		}
	}
	return n, nil
}

// room is how many pods a pass may create under the bound, and whether
// there is a bound at all. It is pure.
func room(bound, inFlight int) (int, bool) {
	if bound <= 0 {
		return 0, false
	}
	return max(bound-inFlight, 0), true
}

// record applies one pass's plan: the nodes it creates pods on are claimed
// (and no longer waited for), the nodes it leaves waiting are waited for in
// the job's rank. A job that waits for anything sleeps until a worker ends.
// Call locked.
func (q *nodeQueue) record(job string, rank runRank, create, waiting []string, starved bool) {
	for _, node := range create {
		q.claims[node] = job
		q.unwait(node, job)
	}
	for _, node := range waiting {
		if q.waits[node] == nil {
			q.waits[node] = map[string]runRank{}
		}
		q.waits[node][job] = rank
	}
	if len(waiting) > 0 || starved {
		q.sleepers[job] = true
	} else {
		delete(q.sleepers, job)
	}
}

func (q *nodeQueue) unwait(node, job string) {
	if w := q.waits[node]; w != nil {
		delete(w, job)
		if len(w) == 0 {
			delete(q.waits, node)
		}
	}
}

// release drops a job's claims on nodes: the cache shows their pods, or
// their creation failed, or they were never seen in time.
func (q *nodeQueue) release(job string, nodes ...string) {
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

// leave forgets a job: it finished or is gone, and neither holds nor waits
// for any node any more.
func (q *nodeQueue) leave(job string) {
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
	delete(q.sleepers, job)
}

// wakeable are the jobs to wake when a worker ends.
func (q *nodeQueue) wakeable() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.sleepers))
	for job := range q.sleepers {
		out = append(out, job)
	}
	return out
}

// podEvents maps a worker pod's events to its job and, when the event frees
// a node (the pod finished or went away), to every sleeping job.
type podEvents struct{ q *nodeQueue }

func (h podEvents) wake(job string, frees bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if job != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: job}})
	}
	if !frees {
		return
	}
	for _, j := range h.q.wakeable() {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: j}})
	}
}

func jobOf(o client.Object) string { return o.GetLabels()[podspec.LabelJob] }

func finished(o client.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && podspec.Finished(pod)
}

func (h podEvents) Create(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(jobOf(e.Object), false, q)
}

func (h podEvents) Update(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(jobOf(e.ObjectNew), finished(e.ObjectNew) && !finished(e.ObjectOld), q)
}

func (h podEvents) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(jobOf(e.Object), true, q)
}

func (h podEvents) Generic(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(jobOf(e.Object), false, q)
}
