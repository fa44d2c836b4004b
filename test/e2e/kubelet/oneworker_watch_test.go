//go:build linux

package kubelet

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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// recording is what watches of the worker pods, the ImageLists and the
// ImageJobs saw, event by event, from before the runs were asked for until
// stop. Read its fields with mu held.
type recording struct {
	mu sync.Mutex
	// busy is, by node, the unfinished worker pods the API server holds at
	// this point of the watch: pod → its job.
	busy map[string]map[types.UID]string
	// overlaps are the moments a node came to hold unfinished pods of two
	// runs (each time once, not at every event while it lasts); overlapping
	// is the nodes that hold them now.
	overlaps    []string
	overlapping map[string]bool
	// pods is the last state of every worker pod seen; gone, those seen
	// deleted.
	pods map[types.UID]*corev1.Pod
	gone map[types.UID]bool
	// jobCreated is each ImageJob's creation time; jobWaited the run it
	// was seen waiting behind (status.waiting > 0).
	jobCreated map[string]time.Time
	jobWaited  map[string]string
	// queued is, by ImageList, the run it was first seen Queued behind;
	// ready the sequence of its Ready condition (status/reason).
	queued map[string]string
	ready  map[string][]string
	// errs are the watches' own failures (an event missed is a failure).
	errs []string

	stops []func()
}

// startRecording starts the three watches at the resource versions of a
// list made now, so that nothing from then on is missed; they go on through
// the API server's ends of a watch until stop (or the test's end).
func startRecording(t *testing.T) *recording {
	t.Helper()
	ctx := testCtx(t)
	r := &recording{
		busy: map[string]map[types.UID]string{}, overlapping: map[string]bool{}, pods: map[types.UID]*corev1.Pod{}, gone: map[types.UID]bool{},
		jobCreated: map[string]time.Time{}, jobWaited: map[string]string{}, queued: map[string]string{}, ready: map[string][]string{},
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ww, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	pods, err := clientset.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelJob})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Fatalf("%d worker pods before the runs; want none", len(pods.Items))
	}
	r.follow(t, "worker pods", pods.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = labelJob
		return clientset.CoreV1().Pods(namespace).Watch(ctx, o)
	}, r.pod)

	var lists eraserv1.ImageListList
	if err := kube.List(ctx, &lists); err != nil {
		t.Fatal(err)
	}
	r.follow(t, "ImageLists", lists.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return ww.Watch(ctx, &eraserv1.ImageListList{}, &client.ListOptions{Raw: &o})
	}, r.list)

	var jobs eraserv1.ImageJobList
	if err := kube.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	r.follow(t, "ImageJobs", jobs.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return ww.Watch(ctx, &eraserv1.ImageJobList{}, &client.ListOptions{Raw: &o})
	}, r.job)
	t.Cleanup(r.stop)
	return r
}

// follow runs one watch from rv (client-go's RetryWatcher: a watch the API
// server ends is resumed where it was; one it can no longer resume is an
// error) and hands each event to handle, with mu held.
func (r *recording) follow(t *testing.T, what, rv string, w cache.WatchFuncWithContext, handle func(watch.Event)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
	if err != nil {
		cancel()
		t.Fatalf("watching %s: %v", what, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range rw.ResultChan() {
			r.mu.Lock()
			if ev.Type == watch.Error {
				r.errs = append(r.errs, fmt.Sprintf("watching %s: %v", what, apierrors.FromObject(ev.Object)))
			} else {
				handle(ev)
			}
			r.mu.Unlock()
		}
		if ctx.Err() == nil {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Sprintf("the watch of %s ended before the test did", what))
			r.mu.Unlock()
		}
	}()
	r.stops = append(r.stops, func() {
		cancel()
		rw.Stop()
		<-done
	})
}

// stop ends the watches and waits for them; it may be called again.
func (r *recording) stop() {
	for _, s := range r.stops {
		s()
	}
	r.stops = nil
}

// podCount is how many worker pods the watch saw, and how many of them it
// saw deleted.
func (r *recording) podCount() (seen, gone int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pods), len(r.gone)
}

// pod follows one worker pod: unfinished (not Succeeded nor Failed, as the
// manager's queue counts them) and on a node, it holds that node; a node
// held by two runs at once is an overlap.
func (r *recording) pod(ev watch.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("pod watch: unexpected %T", ev.Object))
		return
	}
	r.pods[p.UID] = p.DeepCopy()
	node := p.Spec.NodeName
	if ev.Type == watch.Deleted {
		r.gone[p.UID] = true
	}
	if node == "" {
		return
	}
	if r.busy[node] == nil {
		r.busy[node] = map[types.UID]string{}
	}
	if ev.Type == watch.Deleted || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		delete(r.busy[node], p.UID)
	} else {
		r.busy[node][p.UID] = p.Labels[labelJob]
	}
	runs := map[string]bool{}
	for _, job := range r.busy[node] {
		runs[job] = true
	}
	was := r.overlapping[node]
	r.overlapping[node] = len(runs) > 1
	if len(runs) > 1 && !was {
		var held []string
		for uid, job := range r.busy[node] {
			held = append(held, fmt.Sprintf("%s (%s, %s)", r.pods[uid].Name, job, r.pods[uid].Status.Phase))
		}
		sort.Strings(held)
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s at %s (pod %s %s, resourceVersion %s): %s",
			node, time.Now().Format(time.StampMilli), p.Name, ev.Type, p.ResourceVersion, strings.Join(held, ", ")))
	}
}

// list records an ImageList's Ready condition as it changes, and the run
// it was Queued behind.
func (r *recording) list(ev watch.Event) {
	il, ok := ev.Object.(*eraserv1.ImageList)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("ImageList watch: unexpected %T", ev.Object))
		return
	}
	state := "none"
	if c := meta.FindStatusCondition(il.Status.Conditions, eraserv1.ConditionReady); c != nil {
		state = string(c.Status) + "/" + c.Reason
		if c.Reason == eraserv1.ReasonQueued && il.Status.QueuedBehind != "" {
			if _, seen := r.queued[il.Name]; !seen {
				r.queued[il.Name] = il.Status.QueuedBehind
			}
		}
	}
	if seq := r.ready[il.Name]; len(seq) == 0 || seq[len(seq)-1] != state {
		r.ready[il.Name] = append(seq, state)
	}
}

// job records an ImageJob's creation and the run it was seen waiting
// behind.
func (r *recording) job(ev watch.Event) {
	j, ok := ev.Object.(*eraserv1.ImageJob)
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("ImageJob watch: unexpected %T", ev.Object))
		return
	}
	r.jobCreated[j.Name] = j.CreationTimestamp.Time
	if j.Status.Waiting > 0 && r.jobWaited[j.Name] == "" {
		r.jobWaited[j.Name] = j.Status.QueuedBehind
	}
}
