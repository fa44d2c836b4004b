package fault_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// What the queue scenario (queue_test.go) sees of the cluster: every event
// of the worker pods, the ImageLists and the ImageJobs, in the API server's
// order, from watches that resume where they broke off.

// watchFunc opens a watch; it is what a RetryWatcher reopens.
type watchFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

func (f watchFunc) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, opts)
}

// follow hands every event after resource version rv to handle, in order,
// until ctx ends; the returned channel closes then. An error event (the
// version was compacted away: events were lost) is reported to lost and
// ends the watch.
func follow(ctx context.Context, t *testing.T, rv string, open watchFunc, handle func(watch.Event), lost func(string)) <-chan struct{} {
	t.Helper()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, open)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if e.Type == watch.Error {
					lost(fmt.Sprintf("%v", apierrors.FromObject(e.Object)))
					return
				}
				handle(e)
			}
		}
	}()
	return done
}

// watchList lists what list holds (to learn the resource version to watch
// from) and follows the events of that kind after it.
func watchList(ctx context.Context, t *testing.T, wc client.WithWatch, list client.ObjectList, handle func(watch.Event), lost func(string), opts ...client.ListOption) <-chan struct{} {
	t.Helper()
	if err := wc.List(ctx, list, opts...); err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, raw metav1.ListOptions) (watch.Interface, error) {
		all := append([]client.ListOption{&client.ListOptions{Raw: &raw}}, opts...)
		return wc.Watch(ctx, list.DeepCopyObject().(client.ObjectList), all...)
	}
	return follow(ctx, t, list.GetResourceVersion(), open, handle, lost)
}

// podRecord is one worker pod as the watch last showed it.
type podRecord struct {
	pod  *corev1.Pod
	gone bool
	// running is when the test's kubelet started it.
	running time.Time
}

// podLedger checks one worker per node at every pod event: at no
// resource version may a node hold two worker pods that are not finished.
// A pod being deleted still holds its node until it is gone (its
// containers may still run).
type podLedger struct {
	mu     sync.Mutex
	pods   map[types.UID]*podRecord
	events int
	// created is the order in which each node's pods appeared: their
	// jobs' names.
	created    map[string][]string
	violations []string
	// peak is the most unfinished worker pods there were at once, and
	// peakRuns the most runs that had some.
	peak, peakRuns int
	lost           string
}

func newPodLedger() *podLedger {
	return &podLedger{pods: map[types.UID]*podRecord{}, created: map[string][]string{}}
}

func unfinished(r *podRecord) bool { return !r.gone && !podspec.Finished(r.pod) }

func (l *podLedger) apply(e watch.Event) {
	pod, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events++
	r := l.pods[pod.UID]
	if r == nil {
		r = &podRecord{}
		l.pods[pod.UID] = r
		l.created[pod.Spec.NodeName] = append(l.created[pod.Spec.NodeName], pod.Labels[podspec.LabelJob])
	}
	r.pod = pod
	r.gone = r.gone || e.Type == watch.Deleted
	if pod.Spec.NodeName == "" {
		l.violations = append(l.violations, fmt.Sprintf("event %d (%s, rv %s): worker pod %s has no node", l.events, e.Type, pod.ResourceVersion, pod.Name))
	}
	var busy []string
	total, runs := 0, map[string]bool{}
	for _, o := range l.pods {
		if !unfinished(o) {
			continue
		}
		total++
		runs[o.pod.Labels[podspec.LabelJob]] = true
		if o.pod.Spec.NodeName == pod.Spec.NodeName {
			busy = append(busy, fmt.Sprintf("%s (job %s, %s)", o.pod.Name, o.pod.Labels[podspec.LabelJob], o.pod.Status.Phase))
		}
	}
	l.peak, l.peakRuns = max(l.peak, total), max(l.peakRuns, len(runs))
	if len(busy) > 1 {
		sort.Strings(busy)
		l.violations = append(l.violations, fmt.Sprintf("event %d (%s %s, rv %s): node %s holds %d unfinished worker pods: %s",
			l.events, e.Type, pod.Name, pod.ResourceVersion, pod.Spec.NodeName, len(busy), strings.Join(busy, ", ")))
	}
}

func (l *podLedger) setLost(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lost = why
}

// snapshot copies the records, so that the kubelet can act on them
// unlocked.
func (l *podLedger) snapshot() []podRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]podRecord, 0, len(l.pods))
	for _, r := range l.pods {
		out = append(out, *r)
	}
	return out
}

func (l *podLedger) markRunning(uid types.UID, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.pods[uid]; r != nil && r.running.IsZero() {
		r.running = at
	}
}

// runState is a list's or a job's state as one watch event showed it.
type runState struct {
	reason, behind string
	waiting        int
}

func (s runState) String() string {
	out := s.reason
	if s.waiting > 0 {
		out += fmt.Sprintf(" waiting=%d", s.waiting)
	}
	if s.behind != "" {
		out += " behind=" + s.behind
	}
	return out
}

// runLog records, per ImageList or ImageJob name, the states its watch
// events showed (each change once) and the last object.
type runLog struct {
	mu      sync.Mutex
	history map[string][]runState
	lists   map[string]*eraserv1.ImageList
	jobs    map[string]*eraserv1.ImageJob
	lost    string
}

func newRunLog() *runLog {
	return &runLog{history: map[string][]runState{}, lists: map[string]*eraserv1.ImageList{}, jobs: map[string]*eraserv1.ImageJob{}}
}

func (r *runLog) apply(e watch.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var name string
	var st runState
	switch o := e.Object.(type) {
	case *eraserv1.ImageList:
		name = "imagelist/" + o.Name
		st = runState{reason: ready(o.Status.Conditions).Reason, behind: o.Status.QueuedBehind}
		r.lists[o.Name] = o
	case *eraserv1.ImageJob:
		name = "imagejob/" + o.Name
		st = runState{reason: string(o.Status.Phase), behind: o.Status.QueuedBehind, waiting: o.Status.Waiting}
		r.jobs[o.Name] = o
	default:
		return
	}
	if e.Type == watch.Deleted {
		st.reason = "deleted"
	}
	if h := r.history[name]; len(h) == 0 || h[len(h)-1] != st {
		r.history[name] = append(h, st)
	}
}

func (r *runLog) setLost(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = why
}

// states is the recorded history of "imagelist/NAME" or "imagejob/NAME".
func (r *runLog) states(name string) []runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runState(nil), r.history[name]...)
}

// queuedSeen is whether the list's status was ever Queued behind a run.
func (r *runLog) queuedSeen(list string) bool {
	for _, st := range r.states("imagelist/" + list) {
		if st.reason == eraserv1.ReasonQueued && st.behind != "" {
			return true
		}
	}
	return false
}

// waitedSeen is whether the job's status ever counted waiting nodes.
func (r *runLog) waitedSeen(job string) bool {
	for _, st := range r.states("imagejob/" + job) {
		if st.waiting > 0 {
			return true
		}
	}
	return false
}

func describeStates(h []runState) string {
	parts := make([]string, 0, len(h))
	for _, st := range h {
		parts = append(parts, "["+st.String()+"]")
	}
	return strings.Join(parts, " → ")
}

// unfinishedNodes are the nodes with an unfinished pod of the job.
func (l *podLedger) unfinishedNodes(job types.UID) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for _, r := range l.pods {
		if ref := metav1.GetControllerOf(r.pod); ref != nil && ref.UID == job && unfinished(r) {
			out[r.pod.Spec.NodeName] = true
		}
	}
	return out
}

func (l *podLedger) unfinishedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.pods {
		if unfinished(r) {
			n++
		}
	}
	return n
}
