package fault_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// queueConfig starts a scheduled run at once (no scanner, so that its
// pods are the collector's and the remover's) and keeps finished jobs.
const queueConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {scheduling: {repeatInterval: 1h, beginImmediately: true}, imageJob: {cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n" +
	"components: {collector: {enabled: true}, scanner: {enabled: false}}\n"

// TestQueueEightListsDuringAScheduledRun (one worker per node):
// a scheduled run holds every one of 50 nodes when 8 ImageLists are created
// together. From watches on the worker pods, the ImageLists and the ImageJobs
// it checks, at every pod event, that no node ever holds two unfinished
// worker pods; that each list shows its run queued (Ready Queued, behind a
// named run) while it waits; that every run completes on every node with
// only its own pods counted; and that each node served the runs in the
// queue's order: the scheduled run that held it, then the lists, the
// earlier job first.
func TestQueueEightListsDuringAScheduledRun(t *testing.T) {
	s := newScenario(t, "fault-queue", nil)
	const nodes, lists = 50, 8
	deadline := time.Now().Add(5 * time.Minute)
	wait := func(what string, cond func() bool) {
		t.Helper()
		testenv.WaitFor(t, time.Until(deadline), what, cond)
	}

	ctx, stop := context.WithCancel(s.ctx)
	defer stop()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ledger, runs := newPodLedger(), newRunLog()
	watches := []<-chan struct{}{
		watchList(ctx, t, wc, &corev1.PodList{}, ledger.apply, ledger.setLost, client.InNamespace(s.ns), client.HasLabels{podspec.LabelJob}),
		watchList(ctx, t, wc, &eraserv1.ImageListList{}, runs.apply, runs.setLost),
		watchList(ctx, t, wc, &eraserv1.ImageJobList{}, runs.apply, runs.setLost),
	}

	// A schedule state left by an earlier run of this test (-count) would
	// put the next scheduled run an hour away.
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: scheduleState}}
	if err := env.Client.Delete(s.ctx, state); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	s.addNodes(s.ns, nodes)
	names := make([]string, lists)
	for i := range names {
		names[i] = fmt.Sprintf("%s-list-%d", s.ns, i)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = env.Client.Delete(context.Background(), &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	s.startManager(queueConfig)
	k := &queueKubelet{s: s, ledger: ledger, written: map[types.UID]map[string]int{}}
	k.holdScheduled.Store(true)
	watches = append(watches, k.run(ctx))
	began := time.Now()

	var sched eraserv1.ImageJob
	wait("the scheduled run's pods on every node", func() bool {
		jobs := s.scheduledJobs()
		if len(jobs) != 1 {
			return false
		}
		sched = jobs[0]
		return len(ledger.unfinishedNodes(sched.UID)) == nodes
	})
	t.Logf("scheduled run %s holds all %d nodes after %v", sched.Name, nodes, time.Since(began).Round(100*time.Millisecond))

	// The lists, created together.
	var wg sync.WaitGroup
	errs := make([]error, lists)
	for i, name := range names {
		wg.Go(func() {
			errs[i] = env.Client.Create(s.ctx, builder.MakeImageList(name).Images(fmt.Sprintf("docker.io/library/busybox:1.36.%d", i)).Obj())
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	listUIDs := map[string]types.UID{}
	for _, name := range names {
		l := &eraserv1.ImageList{}
		if err := env.Client.Get(s.ctx, client.ObjectKey{Name: name}, l); err != nil {
			t.Fatal(err)
		}
		listUIDs[name] = l.UID
	}

	// Every list had to wait: the scheduled run holds each node until every
	// list's run has queued for them all and each list says so (or the
	// deadline passes, the final checks then saying what was missing).
	jobOfList := map[string]eraserv1.ImageJob{}
	gate := time.Now().Add(min(2*time.Minute, time.Until(deadline)/2))
	queued := 0
	for {
		queued = 0
		for _, name := range names {
			if jobs := s.jobsOf(listUIDs[name]); len(jobs) == 1 {
				jobOfList[name] = jobs[0]
				if runs.waitedSeen(jobs[0].Name) && runs.queuedSeen(name) {
					queued++
				}
			}
		}
		if queued == lists {
			break
		}
		if time.Now().After(gate) {
			t.Errorf("after %v only %d of %d lists' runs were seen queued behind the scheduled run holding every node",
				time.Since(created).Round(time.Second), queued, lists)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(ledger.unfinishedNodes(sched.UID)); n != nodes {
		t.Fatalf("the scheduled run held %d nodes, not all %d, while the lists queued: the test's kubelet let it go", n, nodes)
	}
	t.Logf("%d of %d lists seen queued behind the scheduled run %v after they were created; releasing its pods",
		queued, lists, time.Since(created).Round(100*time.Millisecond))
	k.holdScheduled.Store(false)

	wait("every run to finish and every list to record its run", func() bool {
		var j eraserv1.ImageJob
		if env.Client.Get(s.ctx, client.ObjectKey{Name: sched.Name}, &j) != nil || !finished(&j) {
			return false
		}
		for _, name := range names {
			jobs := s.jobsOf(listUIDs[name])
			if len(jobs) != 1 || !finished(&jobs[0]) {
				return false
			}
			jobOfList[name] = jobs[0]
			l := &eraserv1.ImageList{}
			if env.Client.Get(s.ctx, client.ObjectKey{Name: name}, l) != nil || l.Status.ObservedGeneration != 1 ||
				ready(l.Status.Conditions).Status == metav1.ConditionUnknown {
				return false
			}
		}
		return true
	})
	wait("the pod watch to show every worker finished", func() bool { return ledger.unfinishedCount() == 0 })
	t.Logf("all %d runs finished %v after the lists were created", lists+1, time.Since(created).Round(100*time.Millisecond))
	stop()
	for _, done := range watches {
		<-done
	}

	// (1) One worker per node, at every pod event.
	ledger.mu.Lock()
	t.Logf("pod watch: %d events, %d pods, at most %d unfinished at once, of up to %d runs", ledger.events, len(ledger.pods), ledger.peak, ledger.peakRuns)
	if ledger.peakRuns < 2 {
		t.Errorf("the runs never had unfinished pods at the same time (at most %d): the scenario shared no nodes between running runs", ledger.peakRuns)
	}
	if ledger.lost != "" {
		t.Errorf("the pod watch broke off, events may be missing: %s", ledger.lost)
	}
	for i, v := range ledger.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(ledger.violations)-i)
			break
		}
		t.Errorf("one worker per node broken: %s", v)
	}
	ledger.mu.Unlock()
	if runs.lost != "" {
		t.Errorf("the ImageList/ImageJob watch broke off, events may be missing: %s", runs.lost)
	}

	// (2) Every run completed; (3) each list showed its queue; (4) each run
	// counted its own pods only.
	all := map[string]bool{sched.Name: true}
	for _, j := range jobOfList {
		all[j.Name] = true
	}
	s.checkRun(k, ledger, &sched, nil, nodes)
	for _, name := range names {
		job := jobOfList[name]
		l := &eraserv1.ImageList{}
		if err := env.Client.Get(s.ctx, client.ObjectKey{Name: name}, l); err != nil {
			t.Fatal(err)
		}
		states := runs.states("imagelist/" + name)
		t.Logf("list %s (job %s): %s", name, job.Name, describeStates(states))
		if !runs.queuedSeen(name) {
			t.Errorf("list %s never showed Ready Queued with status.queuedBehind while its run waited: %s", name, describeStates(states))
		}
		for _, st := range states {
			if st.behind != "" && (!all[st.behind] || st.behind == job.Name) {
				t.Errorf("list %s queued behind %q, which is not another run of the scenario", name, st.behind)
			}
		}
		s.checkRun(k, ledger, &job, l, nodes)
	}

	// (5) The queue's order on each node.
	order := []eraserv1.ImageJob{sched}
	for _, j := range jobOfList {
		order = append(order, j)
	}
	slices.SortFunc(order[1:], func(a, b eraserv1.ImageJob) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	want := make([]string, 0, len(order))
	for _, j := range order {
		want = append(want, j.Name)
	}
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	wrong := 0
	for _, node := range s.nodes {
		if got := ledger.created[node]; !slices.Equal(got, want) {
			if wrong++; wrong <= 5 {
				t.Errorf("node %s served the runs in the order %v, want %v (scheduled first, then the lists by job creation, name)", node, got, want)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("... and %d more nodes out of order", wrong-5)
	}
}

// checkRun checks that a finished run completed on every node with its own
// pods only: one pod per node, all its own, and the removals it totals
// (and its list, when it has one) are exactly what its own pods reported.
func (s *scenario) checkRun(k *queueKubelet, ledger *podLedger, job *eraserv1.ImageJob, list *eraserv1.ImageList, nodes int) {
	t := s.t
	t.Helper()
	j := &eraserv1.ImageJob{}
	if err := env.Client.Get(s.ctx, client.ObjectKey{Name: job.Name}, j); err != nil {
		t.Errorf("job %s: %v", job.Name, err)
		return
	}
	st := j.Status
	if st.Phase != eraserv1.PhaseCompleted || st.Desired != nodes || st.Succeeded != nodes || st.Failed != 0 || st.Waiting != 0 {
		t.Errorf("job %s: %s, desired %d, succeeded %d, failed %d, waiting %d; want Completed on all %d nodes: %+v",
			j.Name, st.Phase, st.Desired, st.Succeeded, st.Failed, st.Waiting, nodes, st.FailedNodes)
	}
	onNode := map[string]int{}
	ledger.mu.Lock()
	for _, r := range ledger.pods {
		ref := metav1.GetControllerOf(r.pod)
		if ref == nil || ref.UID != j.UID {
			if r.pod.Labels[podspec.LabelJob] == j.Name {
				t.Errorf("pod %s carries job %s's label but its controller is %+v", r.pod.Name, j.Name, ref)
			}
			continue
		}
		onNode[r.pod.Spec.NodeName]++
		if r.pod.Labels[podspec.LabelJob] != j.Name || r.pod.Status.Phase != corev1.PodSucceeded {
			t.Errorf("job %s's pod %s: label %q, phase %s", j.Name, r.pod.Name, r.pod.Labels[podspec.LabelJob], r.pod.Status.Phase)
		}
	}
	ledger.mu.Unlock()
	for node, n := range onNode {
		if n != 1 {
			t.Errorf("job %s had %d pods on node %s", j.Name, n, node)
		}
	}
	if len(onNode) != nodes {
		t.Errorf("job %s had pods on %d nodes, want %d", j.Name, len(onNode), nodes)
	}
	want := k.removedFor(j.UID, nodes)
	if st.Results == nil || st.Results.Removed != want {
		t.Errorf("job %s totals %+v removed, its own pods reported %d", j.Name, st.Results, want)
	}
	if list == nil {
		return
	}
	c := ready(list.Status.Conditions)
	if c.Status != metav1.ConditionTrue || c.Reason != eraserv1.ReasonSucceeded || list.Status.Job != j.Name ||
		list.Status.Success != int64(nodes) || list.Status.Failed != 0 || list.Status.QueuedBehind != "" {
		t.Errorf("list %s: Ready %s/%s (%s), job %q, success %d, failed %d, queuedBehind %q; want True/Succeeded, job %s, %d, 0, none",
			list.Name, c.Status, c.Reason, c.Message, list.Status.Job, list.Status.Success, list.Status.Failed, list.Status.QueuedBehind, j.Name, nodes)
	}
	if list.Status.Results == nil || list.Status.Results.Removed != want {
		t.Errorf("list %s totals %+v removed, its run's pods reported %d", list.Name, list.Status.Results, want)
	}
}
