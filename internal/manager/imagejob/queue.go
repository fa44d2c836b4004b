// One worker per node, cluster-wide: the runs of every kind share the
// nodes through this queue, so that no node ever holds two Eraser worker
// pods at once, and all runs together keep at most maxWorkerPods in flight.
//
// The queue is this process's memory. What a node holds is read from the
// cache (every unfinished worker pod, indexed by node); the queue adds the
// pods created a moment ago that the cache does not show yet (claims) and
// the runs waiting for each node, in their order (wave.Rank). A restarted
// manager rebuilds the waits as each running job passes; until then the
// cache alone keeps the exclusion.
//
// The queue locks itself: every method takes its lock, and what a wave
// takes is chosen and recorded under one hold of it (take).

package imagejob

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// busyPods is what the queue reads of the cache: the unfinished worker
// pods of every run (cacheopts.Stores).
type busyPods interface {
	// Busy counts them.
	Busy() (int, error)
	// BusyOn lists those on a node.
	BusyOn(node string) ([]*corev1.Pod, error)
}

// nodeQueue is the memory shared by every job's passes.
type nodeQueue struct {
	busy busyPods
	mu   sync.Mutex
	// claims are nodes whose pod a job created that the cache may not show
	// yet, by node: the job's name.
	claims map[string]string
	// waits are the runs waiting for each node, by node, then job name.
	waits map[string]map[string]wave.Rank
	// sleepers are jobs that wait for a node or for room under the bound:
	// any worker that ends wakes them.
	sleepers map[string]bool
}

func newNodeQueue(busy busyPods) *nodeQueue {
	return &nodeQueue{busy: busy, claims: map[string]string{}, waits: map[string]map[string]wave.Rank{}, sleepers: map[string]bool{}}
}

// slot is what a wave may take of the nodes: the room the bound on pods in
// flight leaves (when bounded) and, per node, the run it must wait for.
// Holder reads the queue: it is valid only inside take's choose.
type slot struct {
	room    int
	bounded bool
	holder  wave.HolderFunc
}

// taken is what a wave took: the nodes it creates pods on, those it left
// waiting, and whether the bound stopped it short.
type taken struct {
	create, waiting []string
	starved         bool
}

// take lets one wave of the job choose its nodes with the queue held, so
// that two jobs' passes never both take one node, and records the choice:
// the nodes created on are claimed (and no longer waited for), the nodes
// left waiting are waited for in the job's rank, and a job that waits for
// anything sleeps until a worker ends. bound is maxWorkerPods (0: none).
func (q *nodeQueue) take(job *eraserv1.ImageJob, rank wave.Rank, bound int, choose func(slot) taken) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	inFlight, err := q.inFlight()
	if err != nil {
		return err
	}
	s := slot{holder: q.holder(job, rank)}
	s.room, s.bounded = wave.Room(bound, inFlight)
	t := choose(s)
	for _, node := range t.create {
		q.claims[node] = job.Name
		q.unwait(node, job.Name)
	}
	for _, node := range t.waiting {
		if q.waits[node] == nil {
			q.waits[node] = map[string]wave.Rank{}
		}
		q.waits[node][job.Name] = rank
	}
	if len(t.waiting) > 0 || t.starved {
		q.sleepers[job.Name] = true
	} else {
		delete(q.sleepers, job.Name)
	}
	return nil
}

// holder is the job's HolderFunc over the cache's busy pods and the
// queue. Called with the queue held; used only while it is.
func (q *nodeQueue) holder(job *eraserv1.ImageJob, rank wave.Rank) wave.HolderFunc {
	return func(node string) string {
		if c := q.claims[node]; c != "" && c != job.Name {
			return c
		}
		pods, err := q.busy.BusyOn(node)
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
		var best wave.Rank
		for name, r := range q.waits[node] {
			if name != job.Name && r.Before(rank) && (ahead == "" || r.Before(best)) {
				ahead, best = name, r
			}
		}
		return ahead
	}
}

// inFlight is the worker pods of every run that are not finished: the
// cache's, and the claims the cache does not show yet. Called held.
func (q *nodeQueue) inFlight() (int, error) {
	n, err := q.busy.Busy()
	if err != nil {
		return 0, err
	}
	for node, job := range q.claims {
		shown := false
		pods, err := q.busy.BusyOn(node)
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
