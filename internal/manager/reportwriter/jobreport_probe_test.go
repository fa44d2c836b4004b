package reportwriter

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// finishedPods creates a finished pod of job on each node, in parallel.
func finishedPods(t *testing.T, ctx context.Context, job *eraserv1.ImageJob, nodes []string) {
	t.Helper()
	work := make(chan string)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for node := range work {
				pod := jobPod(job, node)
				if err := env.Client.Create(ctx, pod); err != nil {
					errs <- err
					continue
				}
				s := workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1}}
				pod.Status.Phase = corev1.PodSucceeded
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{Message: string(s.Encode())}}}}
				if err := env.Client.Status().Update(ctx, pod); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// collect runs passes of r over job until its report is complete and
// returns the report's nodes by name.
func collect(t *testing.T, ctx context.Context, r *Reconciler, clk *clocktesting.FakeClock, job *eraserv1.ImageJob, maxPasses int) map[string]nodereport.Node {
	t.Helper()
	for pass := 0; ; pass++ {
		if pass == maxPasses {
			t.Fatalf("report not complete after %d passes: %+v", maxPasses, job.Status.Report)
		}
		clk.Step(passInterval)
		if _, err := r.Reconcile(ctx, requestOf(job)); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			t.Fatal(err)
		}
		if rep := job.Status.Report; rep != nil && rep.Complete {
			break
		}
	}
	return readReport(t, ctx, job)
}

func requestOf(job *eraserv1.ImageJob) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Name: job.Name}}
}

// readReport reads the job's report back, by node name; a node twice is an
// error.
func readReport(t *testing.T, ctx context.Context, job *eraserv1.ImageJob) map[string]nodereport.Node {
	t.Helper()
	shards, err := reportshards.Shards(ctx, env.Client, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]nodereport.Node{}
	for _, n := range nodes {
		if _, dup := out[n.Name]; dup {
			t.Errorf("node %s twice in the report", n.Name)
		}
		out[n.Name] = n
	}
	return out
}

// TestUnreachablePoolFirst: 300 nodes whose logs cannot
// be read (a pool whose kubelet port is firewalled) sort before 100 healthy
// ones. Every healthy node's entries are in the report, and every
// unreachable node says why it has none.
func TestUnreachablePoolFirst(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	job := builder.MakeImageJob("unreachable-first").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	src := &counting{logs: logs{}}
	for i := range 300 {
		nodes = append(nodes, fmt.Sprintf("pool-a-%03d", i))
	}
	for i := range 100 {
		n := fmt.Sprintf("pool-b-%03d", i)
		nodes = append(nodes, n)
		src.logs[podspec.PodName(job.Name, n)+"/remover"] = line("removed", "docker.io/library/nginx:1.25", "sha256:aa", "Unused", 100, "")
	}
	finishedPods(t, ctx, job, nodes)
	job.Status.Phase, job.Status.Desired = eraserv1.PhaseCompleted, len(nodes)
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(env.Client, env.Client, src, clk, Options{Namespace: ns})
	got := collect(t, ctx, r, clk, job, 200)
	if len(got) != len(nodes) {
		t.Errorf("%d nodes in the report, want %d", len(got), len(nodes))
	}
	healthy, unreachable := 0, 0
	for _, name := range nodes {
		n, ok := got[name]
		switch {
		case !ok:
			t.Errorf("node %s not in the report", name)
		case strings.HasPrefix(name, "pool-b-"):
			if len(n.Entries) != 1 || n.Unavailable != "" {
				t.Errorf("healthy node %s: %d entries, unavailable %q", name, len(n.Entries), n.Unavailable)
			} else {
				healthy++
			}
		default:
			if len(n.Entries) != 0 || !strings.Contains(n.Unavailable, "no preferred addresses found") {
				t.Errorf("unreachable node %s: %d entries, unavailable %q", name, len(n.Entries), n.Unavailable)
			} else {
				unreachable++
			}
		}
	}
	t.Logf("%d healthy nodes read, %d unreachable said why, %d log reads", healthy, unreachable, src.reads)
}

// pods are finished pods on the nodes, in memory.
func pods(nodes []string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range nodes {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + n}, Spec: corev1.PodSpec{NodeName: n},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: podspec.RemoverContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}}})
	}
	return out
}

// TestGatherFindsReadableNodes: pools of unreachable and healthy nodes in
// any order; passes (gather) until every node is in: each healthy node is
// read, each unreachable one says why it has none, the failed reads stay
// within the bound however many nodes are unreachable, and a job with no
// readable log gives up within a few passes.
func TestGatherFindsReadableNodes(t *testing.T) {
	type pool struct {
		n       int
		healthy bool
	}
	cases := map[string][]pool{
		"unreachable first":    {{300, false}, {100, true}},
		"unreachable last":     {{100, true}, {300, false}},
		"interleaved pools":    {{200, false}, {50, true}, {200, false}, {50, true}, {200, false}, {50, true}},
		"few healthy, spread":  {{90, false}, {5, true}, {90, false}, {5, true}, {90, false}, {5, true}, {90, false}},
		"all unreachable":      {{3000, false}},
		"a few failures, then": {{10, false}, {500, true}, {5, false}, {500, true}},
	}
	for name, pools := range cases {
		t.Run(name, func(t *testing.T) {
			src := &counting{logs: logs{}}
			var nodes []string
			healthy := map[string]bool{}
			for k, p := range pools {
				for i := range p.n {
					n := fmt.Sprintf("pool-%02d-%04d", k, i)
					nodes = append(nodes, n)
					if p.healthy {
						healthy[n] = true
						src.logs["p-"+n+"/remover"] = line("removed", "a:1", "sha256:a", "Unused", 1, "")
					}
				}
			}
			r := NewReconciler(nil, nil, src, clocktesting.NewFakeClock(time.Now()), Options{})
			st := &jobState{}
			todo := pods(nodes)
			got := map[string]nodereport.Node{}
			passes := 0
			for len(todo) > 0 {
				if passes++; passes > 200 {
					t.Fatalf("%d nodes left after 200 passes", len(todo))
				}
				for _, n := range r.gather(context.Background(), todo, st) {
					if _, dup := got[n.Name]; dup {
						t.Fatalf("node %s gathered twice", n.Name)
					}
					got[n.Name] = n
				}
				todo = slices.DeleteFunc(todo, func(p *corev1.Pod) bool { _, ok := got[p.Spec.NodeName]; return ok })
			}
			failed := 0
			for _, name := range nodes {
				n := got[name]
				if healthy[name] {
					if len(n.Entries) != 1 || n.Unavailable != "" {
						t.Errorf("healthy node %s: %d entries, unavailable %q", name, len(n.Entries), n.Unavailable)
					}
					continue
				}
				if !strings.Contains(n.Unavailable, "no preferred addresses found") {
					t.Errorf("unreachable node %s: unavailable %q", name, n.Unavailable)
				}
			}
			failed = src.reads - len(healthy)
			if bound := maxFailedReads + maxFailStreak + fetchWorkers; failed > bound {
				t.Errorf("%d failed reads, over the bound of %d", failed, bound)
			}
			// Passes are passInterval apart: a job none of whose logs can
			// be read spends its failed reads in a few (it took 32 when
			// probes did not grow: a minute of its pods kept).
			if len(healthy) == 0 && passes > 8 {
				t.Errorf("%d passes to give up on a job whose logs cannot be read, want at most 8", passes)
			}
			t.Logf("%d passes, %d reads, %d failed", passes, src.reads, failed)
		})
	}
}

// hanging is a LogSource whose logs never start.
type hanging struct{}

func (hanging) Log(ctx context.Context, _, _, _ string, _ int64) (io.ReadCloser, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestOpenTimeout: a log that does not start (a kubelet port firewalled:
// the connection hangs) costs openTimeout, not the whole read's timeout.
func TestOpenTimeout(t *testing.T) {
	r := NewReconciler(nil, nil, hanging{}, clocktesting.NewFakeClock(time.Now()), Options{})
	r.openTimeout = 50 * time.Millisecond
	start := time.Now()
	got := r.gather(context.Background(), pods([]string{"a", "b"}), &jobState{})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("two hanging logs took %s", took)
	}
	for _, n := range got {
		if !strings.Contains(n.Unavailable, "did not start within 50ms") {
			t.Errorf("node %s: %q", n.Name, n.Unavailable)
		}
	}
}
