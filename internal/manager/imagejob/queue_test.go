package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// queued is the part of a wave the queue decides.
type queued struct {
	Create  []string
	Started int
	Waiting map[string]string
	Failed  map[string]string
	Starved bool
}

func held(m map[string]string) holderFunc { return func(n string) string { return m[n] } }

// TestPlanQueued: a node another run holds is passed and waits, a node that
// waited is taken first once free, and the bound on pods in flight stops a
// wave short without passing anyone.
func TestPlanQueued(t *testing.T) {
	cases := map[string]struct {
		world world
		want  queued
	}{
		"a held node is passed, the others go on": {
			world: newWorld("a", "b", "c").with(func(w *world) { w.holder = held(map[string]string{"b": "imagejob-scheduled-1"}) }),
			want:  queued{Create: []string{"a", "c"}, Started: 3, Waiting: map[string]string{"b": "imagejob-scheduled-1"}},
		},
		"every node held: the run is reached and waits": {
			world: newWorld("a", "b").with(func(w *world) { w.holder = held(map[string]string{"a": "x", "b": "y"}) }),
			want:  queued{Started: 2, Waiting: map[string]string{"a": "x", "b": "y"}},
		},
		"a node that waited is taken once free, before the cursor's": {
			world: newWorld("a", "b", "c").with(func(w *world) {
				w.limit, w.started = 1, 2
				w.waiting = map[string]bool{"a": true}
				w.pods["b"] = pod("b").Phase(corev1.PodSucceeded).Obj()
			}),
			want: queued{Create: []string{"a"}, Started: 2},
		},
		"a node still held waits on": {
			world: newWorld("a", "b").with(func(w *world) {
				w.started = 1
				w.waiting = map[string]bool{"a": true}
				w.holder = held(map[string]string{"a": "x"})
			}),
			want: queued{Create: []string{"b"}, Started: 2, Waiting: map[string]string{"a": "x"}},
		},
		"a waiting node whose pod appeared waits no more": {
			world: newWorld("a").with(func(w *world) {
				w.started = 1
				w.waiting = map[string]bool{"a": true}
				w.pods["a"] = pod("a").Running(t0).Obj()
			}),
			want: queued{Started: 1},
		},
		"a waiting node that was deleted fails": {
			world: newWorld("a").with(func(w *world) {
				w.started = 1
				w.waiting = map[string]bool{"a": true}
				delete(w.nodes, "a")
			}),
			want: queued{Started: 1, Failed: map[string]string{"a": ReasonNodeDeleted}},
		},
		"the bound stops the wave without passing nodes": {
			world: newWorld("a", "b", "c").with(func(w *world) { w.room, w.bounded = 1, true }),
			want:  queued{Create: []string{"a"}, Started: 1, Starved: true},
		},
		"no room: waiting nodes wait, the cursor stays": {
			world: newWorld("a", "b").with(func(w *world) {
				w.started = 1
				w.waiting = map[string]bool{"a": true}
				w.room, w.bounded = 0, true
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}, Starved: true},
		},
		"over the budget a waiting node is never started": {
			world: newWorld("a", "b").with(func(w *world) {
				w.started = 2
				w.waiting = map[string]bool{"a": true}
				w.halted = true
			}),
			want: queued{Started: 2, Waiting: map[string]string{"a": ""}},
		},
		"a waiting node in creation backoff waits it out": {
			world: newWorld("a").with(func(w *world) {
				w.started = 1
				w.waiting = map[string]bool{"a": true}
				w.creating["a"] = createFailure{first: t0.Add(-time.Second), next: t0.Add(time.Second), attempts: 1}
			}),
			want: queued{Started: 1, Waiting: map[string]string{"a": ""}},
		},
	}
	got, want := map[string]queued{}, map[string]queued{}
	for name, tc := range cases {
		p := plan(tc.world, observe(tc.world))
		q := queued{Started: p.started, Starved: p.starved}
		for _, i := range p.create {
			q.Create = append(q.Create, tc.world.targets[i].Name)
		}
		if len(p.waiting) > 0 {
			q.Waiting = p.waiting
		}
		if len(p.failed) > 0 {
			q.Failed = map[string]string{}
			for n, f := range p.failed {
				q.Failed[n] = f.Reason
			}
		}
		got[name], want[name] = q, tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
}

// TestWaitingThenAdvance: a node that waited and whose creation fails waits
// on, rather than rewinding the cursor over the nodes reached after it.
func TestWaitingThenAdvance(t *testing.T) {
	w := newWorld("a", "b", "c").with(func(w *world) {
		w.started = 2
		w.waiting = map[string]bool{"a": true}
		w.pods["b"] = pod("b").Running(t0).Obj()
	})
	o := observe(w)
	p := plan(w, o)
	errs := make([]error, len(p.create))
	errs[0] = errTest // a, the waiting node
	next := advance(w, p, errs)
	got := struct {
		Started int
		Waiting map[string]bool
		Pending map[string]bool
		Tally   int
	}{next.started, next.waiting, next.pending, observe(next).waiting}
	want := struct {
		Started int
		Waiting map[string]bool
		Pending map[string]bool
		Tally   int
	}{3, map[string]bool{"a": true}, map[string]bool{"c": true}, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the wave (-want +got):\n%s", diff)
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("refused")

// TestRunRank: ImageList runs before scheduled ones, then the earlier run.
func TestRunRank(t *testing.T) {
	list := func(name string, at time.Duration) runRank { return runRank{created: t0.Add(at), name: name} }
	sched := func(name string, at time.Duration) runRank {
		return runRank{scheduled: true, created: t0.Add(at), name: name}
	}
	cases := map[string]struct {
		a, b runRank
		want bool
	}{
		"a list before an earlier schedule": {a: list("l", time.Hour), b: sched("s", 0), want: true},
		"a schedule after a later list":     {a: sched("s", 0), b: list("l", time.Hour), want: false},
		"the earlier list first":            {a: list("l1", 0), b: list("l2", time.Second), want: true},
		"the later list after":              {a: list("l2", time.Second), b: list("l1", 0), want: false},
		"same time: by name":                {a: list("a", 0), b: list("b", 0), want: true},
		"not before itself":                 {a: list("a", 0), b: list("a", 0), want: false},
	}
	got, want := map[string]bool{}, map[string]bool{}
	for name, tc := range cases {
		got[name], want[name] = tc.a.before(tc.b), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("before (-want +got):\n%s", diff)
	}
}

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

// TestConfine: a catch-up run keeps only its nodes, in the node list's
// order, skipped ones included; nil keeps every node.
func TestConfine(t *testing.T) {
	all := jobdata.Nodes{
		Targets: []nodefilter.Target{{Name: "a", OS: "linux"}, {Name: "b", OS: "linux"}, {Name: "c", OS: "windows"}},
		Skipped: []nodefilter.Skipped{{Name: "d", Reason: nodefilter.ReasonNotReady}},
	}
	cases := map[string]struct {
		only []string
		want jobdata.Nodes
	}{
		"nil: all":   {want: all},
		"some":       {only: []string{"c", "a", "gone"}, want: jobdata.Nodes{Targets: []nodefilter.Target{all.Targets[0], all.Targets[2]}, Skipped: []nodefilter.Skipped{}}},
		"a skipped":  {only: []string{"d"}, want: jobdata.Nodes{Targets: []nodefilter.Target{}, Skipped: all.Skipped}},
		"empty list": {only: []string{}, want: jobdata.Nodes{Targets: []nodefilter.Target{}, Skipped: []nodefilter.Skipped{}}},
	}
	got, want := map[string]jobdata.Nodes{}, map[string]jobdata.Nodes{}
	for name, tc := range cases {
		got[name], want[name] = confine(all, tc.only), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("confine (-want +got):\n%s", diff)
	}
}
