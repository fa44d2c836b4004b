package imagejob

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
)

// jobState is what this process remembers of a running job between passes,
// beyond what its status records. Losing it (a restart, another leader)
// costs at most a repeated Event or a retry that starts its backoff again:
// everything that decides the job's outcome is read anew every pass.
type jobState struct {
	mu sync.Mutex
	// uid tells a job from an earlier one of the same name.
	uid types.UID
	// lastPass is when the job was last examined.
	lastPass time.Time
	// created are nodes whose pod this process created, and when, that the
	// cache may not show yet.
	created map[string]time.Time
	// creating are nodes whose pod creation failed and is being retried.
	creating map[string]wave.CreateFailure
	// unadmitted is the pod of each node its kubelet last refused at
	// admission, counted once in creating; unadmittedPods are those the
	// pass's gather found, to delete.
	unadmitted     map[string]types.UID
	unadmittedPods []*corev1.Pod
	// failures are every node failure on record; the status names at most
	// MaxReportedNodes of them.
	failures map[string]eraserv1.NodeFailure
	// exclusionsWarned are the exclusion-list ConfigMaps (name@version)
	// warned of for this job.
	exclusionsWarned map[string]bool
	// announced are the failures an Event was emitted for.
	announced map[string]bool
	// refusals are the creation errors an Event was emitted for.
	refusals map[string]bool
	// failureEvents counts the NodeFailed Events emitted.
	failureEvents int
	// overrun is whether the FailureBudgetExceeded Event was emitted.
	overrun bool
	// erred is whether the last pass failed.
	erred bool
	// refSet and refParts are the cluster set the job last wrote
	// (waveReferences): a wave with the same set reuses its parts.
	refSet   string
	refParts []string
	// data and nodes are the job's immutable ConfigMaps, parsed.
	data  *jobdata.Data
	nodes jobdata.Nodes
	// db is the run's vulnerability DB, settled before its first wave.
	db runDB
	// finished memoizes finished pods' outcomes by node.
	finished map[string]judged
	// podsSeen are when this process saw each unfinished pod begin its
	// timeouts, by node (wave/sight.go).
	podsSeen map[string]wave.Seen
	// seen is when this process first saw the job, for the wait for its
	// data: the job's creationTimestamp is the API server's clock.
	seen time.Time
	// finishedSeen is when this process first saw the job finished, for
	// the pods' wait for the report (cleanup).
	finishedSeen time.Time
	// notReady is when this process first saw each node not Ready, for a
	// node whose Ready condition carries no time (stall.go).
	notReady map[string]time.Time
}

// judged is a finished pod's outcome as of a resource version.
type judged struct {
	version string
	out     wave.Outcome
}

// state returns the job's memory, seeded from its status on first use so
// that a new leader neither forgets recorded failures nor announces them
// again.
func (r *Reconciler) state(job *eraserv1.ImageJob) *jobState {
	if v, ok := r.jobs.Load(job.Name); ok && v.(*jobState).uid == job.UID {
		return v.(*jobState)
	}
	st := &jobState{uid: job.UID,
		created: map[string]time.Time{}, creating: map[string]wave.CreateFailure{}, unadmitted: map[string]types.UID{},
		failures: map[string]eraserv1.NodeFailure{}, announced: map[string]bool{}, refusals: map[string]bool{},
		finished: map[string]judged{}, podsSeen: map[string]wave.Seen{}, notReady: map[string]time.Time{},
	}
	for _, f := range job.Status.FailedNodes {
		st.failures[f.Node] = f
		st.announced[f.Node] = true
	}
	r.jobs.Store(job.Name, st)
	return st
}

// forget drops a job's memory: it finished and was cleaned up, or is gone.
func (r *Reconciler) forget(job string) {
	r.jobs.Delete(job)
	r.queue.Leave(job)
}

// expectedWithin is how long a pod this process created may be missing
// from the cache before the API server is asked about it.
const expectedWithin = time.Minute

// expected reports a node whose pod this process created recently.
func (st *jobState) expected(node string, now time.Time) bool {
	t, ok := st.created[node]
	if !ok {
		return false
	}
	if now.Sub(t) > expectedWithin {
		delete(st.created, node)
		return false
	}
	return true
}
