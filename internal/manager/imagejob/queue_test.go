package imagejob

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// busyNodes counts, per node, the unfinished worker pods of every job.
func (f *fixture) busyNodes() map[string]int {
	f.t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(f.ctx, &pods, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if !podspec.Finished(&p) {
			out[p.Spec.NodeName]++
		}
	}
	return out
}

func (f *fixture) oneWorkerPerNode() {
	f.t.Helper()
	for node, n := range f.busyNodes() {
		if n > 1 {
			f.t.Fatalf("node %s holds %d unfinished worker pods", node, n)
		}
	}
}

// TestOneWorkerPerNode: a scheduled run holds three nodes; an ImageList's
// run reaches them and waits, each node taking it as soon as its own worker
// ended, across a manager restart; the list's run is visible as queued.
func TestOneWorkerPerNode(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj(), builder.MakeNode("c").Obj())
	f.job("sched", podspec.KindCollector, baseConfig)
	f.reconcile("sched")
	f.reconcile("sched")
	if n := len(f.pods("sched")); n != 3 {
		t.Fatalf("the scheduled run has %d pods, want 3", n)
	}
	f.job("list", podspec.KindManual, baseConfig, "alpine:3.19")
	f.reconcile("list")
	f.reconcile("list")
	f.oneWorkerPerNode()
	job := f.get("list")
	got := struct {
		Pods, Started, Waiting int
		Indexes, Behind        string
	}{len(f.pods("list")), job.Status.Started, job.Status.Waiting, job.Status.WaitingIndexes, job.Status.QueuedBehind}
	if diff := cmp.Diff(struct {
		Pods, Started, Waiting int
		Indexes, Behind        string
	}{0, 3, 3, "0-2", "sched"}, got); diff != "" {
		t.Fatalf("the list's run (-want +got):\n%s", diff)
	}

	// b's scheduled worker ends: b takes the list's run, the others wait.
	sched := f.pods("sched")
	f.finishPod(&sched[1], corev1.PodSucceeded, nil)
	f.reconcile("list")
	f.oneWorkerPerNode()
	if pods := f.pods("list"); len(pods) != 1 || pods[0].Spec.NodeName != "b" {
		t.Fatalf("after b's worker ended the list has pods %v, want one on b", podNodes(pods))
	}
	if job := f.get("list"); job.Status.Waiting != 2 || job.Status.WaitingIndexes != "0,2" {
		t.Fatalf("waiting %d %q, want 2 \"0,2\"", job.Status.Waiting, job.Status.WaitingIndexes)
	}

	// A restarted manager knows the waiting nodes from the status.
	f.r = f.newReconciler()
	f.reconcile("list")
	f.oneWorkerPerNode()
	if n := len(f.pods("list")); n != 1 {
		t.Fatalf("after a restart the list has %d pods, want 1", n)
	}
	f.finishPod(&sched[0], corev1.PodSucceeded, nil)
	f.finishPod(&sched[2], corev1.PodSucceeded, nil)
	f.reconcile("list")
	f.oneWorkerPerNode()
	for _, p := range f.pods("list") {
		f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
	}
	f.reconcile("list")
	job = f.get("list")
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 3 || job.Status.Waiting != 0 || job.Status.QueuedBehind != "" {
		t.Fatalf("the list's run did not complete on every node: %+v", job.Status)
	}
}

// TestListGoesFirst: two runs wait for one node; when it frees, the
// ImageList's run takes it although the scheduled run came first.
func TestListGoesFirst(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj())
	f.job("first", podspec.KindManual, baseConfig, "x:1")
	f.reconcile("first")
	f.reconcile("first")
	f.job("sched", podspec.KindCollector, baseConfig)
	f.reconcile("sched")
	f.reconcile("sched")
	f.job("list", podspec.KindManual, baseConfig, "y:1")
	f.reconcile("list")
	f.reconcile("list")
	f.oneWorkerPerNode()
	pods := f.pods("first")
	f.finishPod(&pods[0], corev1.PodSucceeded, removed(1, 1))
	// The scheduled run passes first, yet the list queued for the node.
	f.reconcile("sched")
	f.reconcile("list")
	f.oneWorkerPerNode()
	if s, l := len(f.pods("sched")), len(f.pods("list")); s != 0 || l != 1 {
		t.Fatalf("after the node freed: scheduled run %d pods, list %d; want 0 and 1", s, l)
	}
	if b := f.get("sched").Status.QueuedBehind; b != "list" {
		t.Errorf("the scheduled run waits behind %q, want list", b)
	}
}

// TestMaxWorkerPods: two runs on three nodes with maxWorkerPods 2 never
// have more than two unfinished pods between them.
func TestMaxWorkerPods(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(3, "bound")
	doc := baseConfig + "manager: {imageJob: {maxWorkerPods: 2}}\n"
	f.job("one", podspec.KindManual, doc, "x:1")
	f.job("two", podspec.KindManual, doc, "y:1")
	inFlight := func() int {
		n := 0
		for _, c := range f.busyNodes() {
			n += c
		}
		return n
	}
	for range 12 {
		for _, j := range []string{"one", "two"} {
			f.reconcile(j)
			if n := inFlight(); n > 2 {
				t.Fatalf("%d worker pods in flight, the bound is 2", n)
			}
			f.oneWorkerPerNode()
		}
		for _, j := range []string{"one", "two"} {
			for _, p := range f.pods(j) {
				if !podspec.Finished(&p) {
					f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
					break
				}
			}
		}
	}
	for _, j := range []string{"one", "two"} {
		if job := f.get(j); job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 3 {
			t.Errorf("job %s: %+v", j, job.Status)
		}
	}
}

func podNodes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

// fakeBusy is the cache's busy pods, by node, for the queue's unit tests.
type fakeBusy struct {
	mu   sync.Mutex
	pods map[string][]*corev1.Pod
	// err fails Busy, errOn BusyOn.
	err, errOn error
}

func (f *fakeBusy) Busy() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ps := range f.pods {
		n += len(ps)
	}
	return n, f.err
}

func (f *fakeBusy) BusyOn(node string) ([]*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pods[node]), f.errOn
}

func (f *fakeBusy) add(job, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[node] = append(f.pods[node], builder.MakePod(job+"-"+node, node, time.Time{}).Job(job).Obj())
}

func (f *fakeBusy) remove(job, node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[node] = slices.DeleteFunc(f.pods[node], func(p *corev1.Pod) bool { return p.Labels[podspec.LabelJob] == job })
}

func queueJob(name string, created time.Time) *eraserv1.ImageJob {
	return &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
}

// takeFree takes every free node of nodes, up to the room, and leaves the
// held ones waiting: a wave's choice, reduced to the queue's part.
func takeFree(nodes []string, got *slot) func(slot) taken {
	return func(s slot) taken {
		if got != nil {
			*got = slot{room: s.room, bounded: s.bounded}
		}
		var t taken
		for _, n := range nodes {
			switch {
			case s.holder(n) != "":
				t.waiting = append(t.waiting, n)
			case s.bounded && len(t.create) >= s.room:
				t.starved = true
			default:
				t.create = append(t.create, n)
			}
		}
		return t
	}
}

// TestQueueTake: what a wave may take as the runs before it took theirs,
// their pods showed in the cache, were released or ended.
func TestQueueTake(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	list, sched, late := queueJob("list", at), queueJob("sched", at.Add(-time.Hour)), queueJob("late", at.Add(time.Hour))
	listRank := wave.RankOf(list, podspec.KindManual)
	schedRank := wave.RankOf(sched, podspec.KindCollector)
	lateRank := wave.RankOf(late, podspec.KindManual)
	early := queueJob("early", at.Add(-time.Minute))
	earlyRank := wave.RankOf(early, podspec.KindManual)
	type result struct {
		Create, Waiting []string
		Starved         bool
		Holders         map[string]string
		Room            int
		Bounded         bool
	}
	cases := map[string]struct {
		// before runs against the queue and its cache first.
		before func(q *nodeQueue, busy *fakeBusy)
		bound  int
		want   result
	}{
		"an empty queue: every node": {
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"a node another run claimed waits for it": {
			before: func(q *nodeQueue, _ *fakeBusy) {
				_ = q.take(sched, schedRank, 0, takeFree([]string{"a"}, nil))
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "sched"}},
		},
		"a claim released while the cache shows the pod: the pod holds the node": {
			before: func(q *nodeQueue, busy *fakeBusy) {
				_ = q.take(sched, schedRank, 0, takeFree([]string{"a"}, nil))
				busy.add("sched", "a")
				q.release("sched", "a")
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "sched"}},
		},
		"a run that left frees its claims": {
			before: func(q *nodeQueue, _ *fakeBusy) {
				_ = q.take(sched, schedRank, 0, takeFree([]string{"a", "b"}, nil))
				q.leave("sched")
			},
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"a run queued for the node that ranks first goes first": {
			before: func(q *nodeQueue, busy *fakeBusy) {
				busy.add("other", "a")
				_ = q.take(early, earlyRank, 0, takeFree([]string{"a"}, nil))
				busy.remove("other", "a")
			},
			want: result{Create: []string{"b"}, Waiting: []string{"a"}, Holders: map[string]string{"a": "early"}},
		},
		"runs queued for the node that rank after are passed: a later list, a schedule": {
			before: func(q *nodeQueue, busy *fakeBusy) {
				busy.add("other", "a")
				_ = q.take(late, lateRank, 0, takeFree([]string{"a"}, nil))
				_ = q.take(sched, schedRank, 0, takeFree([]string{"a"}, nil))
				busy.remove("other", "a")
			},
			want: result{Create: []string{"a", "b"}, Holders: map[string]string{}},
		},
		"the bound counts the claims the cache does not show yet": {
			before: func(q *nodeQueue, busy *fakeBusy) {
				busy.add("sched", "x")
				_ = q.take(sched, schedRank, 0, takeFree([]string{"y"}, nil))
			},
			bound: 3,
			want:  result{Create: []string{"a"}, Starved: true, Holders: map[string]string{}, Room: 1, Bounded: true},
		},
	}
	got, want := map[string]result{}, map[string]result{}
	for name, tc := range cases {
		busy := &fakeBusy{pods: map[string][]*corev1.Pod{}}
		q := newNodeQueue(busy)
		if tc.before != nil {
			tc.before(q, busy)
		}
		var s slot
		var holders map[string]string
		choose := takeFree([]string{"a", "b"}, &s)
		err := q.take(list, listRank, tc.bound, func(in slot) taken {
			holders = map[string]string{}
			for _, n := range []string{"a", "b"} {
				if h := in.holder(n); h != "" {
					holders[n] = h
				}
			}
			return choose(in)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tk := choose(slot{room: s.room, bounded: s.bounded, holder: func(n string) string { return holders[n] }})
		got[name] = result{Create: tk.create, Waiting: tk.waiting, Starved: tk.starved, Holders: holders, Room: s.room, Bounded: s.bounded}
		want[name] = tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("take (-want +got):\n%s", diff)
	}
}

// TestQueueCacheNotSynced: a cache that cannot count the pods in flight
// fails the take, which records nothing; one that cannot list a node's
// pods holds the node (waiting is the safe answer).
func TestQueueCacheNotSynced(t *testing.T) {
	job := queueJob("j", time.Time{})
	rank := wave.RankOf(job, podspec.KindManual)
	q := newNodeQueue(&fakeBusy{pods: map[string][]*corev1.Pod{}, err: errors.New("not synced")})
	if err := q.take(job, rank, 0, takeFree([]string{"a"}, nil)); err == nil {
		t.Error("a take with an unsynced cache succeeded")
	}
	if len(q.claims) != 0 || len(q.sleepers) != 0 {
		t.Errorf("a failed take recorded claims %v, sleepers %v", q.claims, q.sleepers)
	}
	q = newNodeQueue(&fakeBusy{pods: map[string][]*corev1.Pod{}, errOn: errors.New("not synced")})
	var holder string
	if err := q.take(job, rank, 0, func(s slot) taken { holder = s.holder("a"); return taken{} }); err != nil {
		t.Fatal(err)
	}
	if holder == "" {
		t.Error("a node the cache cannot answer for is free")
	}
}

// TestQueueNeverTwoWorkersOnANode: many runs' passes at once, each taking
// what is free of a few shared nodes, its pods showing in the cache, then
// ending: no node is ever held by two runs, and the bound on pods in
// flight is never passed. Run it under -race.
func TestQueueNeverTwoWorkersOnANode(t *testing.T) {
	const runs, passes, bound = 8, 50, 3
	nodes := []string{"a", "b", "c", "d"}
	busy := &fakeBusy{pods: map[string][]*corev1.Pod{}}
	q := newNodeQueue(busy)
	var mu sync.Mutex
	on := map[string]string{}
	var violations []string
	var wg sync.WaitGroup
	for r := range runs {
		job := queueJob(fmt.Sprintf("run-%d", r), time.Unix(int64(r), 0))
		rank := wave.RankOf(job, map[bool]podspec.Kind{true: podspec.KindCollector, false: podspec.KindManual}[r%2 == 0])
		wg.Go(func() {
			for range passes {
				var mine []string
				err := q.take(job, rank, bound, func(s slot) taken {
					t := takeFree(nodes, nil)(s)
					mu.Lock()
					for _, n := range t.create {
						if h := on[n]; h != "" {
							violations = append(violations, fmt.Sprintf("%s took %s, held by %s", job.Name, n, h))
						}
						on[n] = job.Name
					}
					if len(on) > bound {
						violations = append(violations, fmt.Sprintf("%d pods in flight, bound %d", len(on), bound))
					}
					mu.Unlock()
					mine = t.create
					return t
				})
				if err != nil {
					t.Error(err)
					return
				}
				// The pods show in the cache, the claims go; then they end.
				for _, n := range mine {
					busy.add(job.Name, n)
				}
				q.release(job.Name, mine...)
				runtime.Gosched()
				for _, n := range mine {
					mu.Lock()
					delete(on, n)
					mu.Unlock()
					busy.remove(job.Name, n)
				}
			}
			q.leave(job.Name)
		})
	}
	wg.Wait()
	if len(violations) > 0 {
		t.Errorf("%d violations, first: %s", len(violations), violations[0])
	}
}
