// The node queue (nodequeue) as the reconciler uses it: a run's place in it,
// what it reads of the cache, and the worker pod events that wake the runs
// it holds back.

package imagejob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodequeue"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// busyPods is what the cache holds for the queue: the unfinished worker
// pods of every run (cacheopts.Stores).
type busyPods interface {
	// Busy counts them.
	Busy() (int, error)
	// BusyOn lists those on a node.
	BusyOn(node string) ([]*corev1.Pod, error)
}

// workers shows the queue the cache's worker pods as the runs they are of.
type workers struct{ pods busyPods }

func (w workers) Busy() (int, error) { return w.pods.Busy() }

func (w workers) BusyOn(node string) ([]nodequeue.Worker, error) {
	pods, err := w.pods.BusyOn(node)
	if err != nil {
		return nil, err
	}
	out := make([]nodequeue.Worker, 0, len(pods))
	for _, pod := range pods {
		out = append(out, nodequeue.Worker{Job: pod.Labels[podspec.LabelJob], Run: jobdata.RunOf(pod)})
	}
	return out, nil
}

// podEvents maps a worker pod's events to its job and, when the event frees
// a node (the pod finished or went away), to every sleeping job.
type podEvents struct{ q *nodequeue.Queue }

func (h podEvents) wake(job string, frees bool, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if job != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: job}})
	}
	if !frees {
		return
	}
	for _, j := range h.q.Wakeable() {
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

// rankOf is the job's place among the runs waiting for a node: a scheduled
// run (the collector's) after the ImageLists', then by creation.
func rankOf(job *eraserv1.ImageJob, kind podspec.Kind) nodequeue.Rank {
	return nodequeue.Rank{Scheduled: kind == podspec.KindCollector, Created: job.CreationTimestamp.Time, Name: job.Name}
}
