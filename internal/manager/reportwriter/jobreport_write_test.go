package reportwriter

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// faulty is a client whose shard creates fail as told: fail(name, n) says
// whether the n-th create of that name (from 1) fails, and whether it
// fails after the object was created (a timeout the server outlived).
type faulty struct {
	client.Client
	mu    sync.Mutex
	tries map[string]int
	fail  func(name string, n int) (fail, after bool)
	// invalid says whether the API server refuses the n-th create of the
	// name for good (its content over the size limit, say).
	invalid func(name string, n int) bool
}

func (f *faulty) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*corev1.ConfigMap); !ok {
		return f.Client.Create(ctx, obj, opts...)
	}
	f.mu.Lock()
	f.tries[obj.GetName()]++
	fail, after := f.fail(obj.GetName(), f.tries[obj.GetName()])
	f.mu.Unlock()
	if f.invalid != nil && f.invalid(obj.GetName(), f.tries[obj.GetName()]) {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ConfigMap").GroupKind(), obj.GetName(), nil)
	}
	if !fail {
		return f.Client.Create(ctx, obj, opts...)
	}
	if after {
		if err := f.Client.Create(ctx, obj, opts...); err != nil {
			return err
		}
	}
	return apierrors.NewTimeoutError("injected", 1)
}

// writeJob is a finished job of the nodes, each of whose logs has images
// result lines of its own.
func writeJob(t *testing.T, ctx context.Context, name string, count, images int) (*eraserv1.ImageJob, []string, logs) {
	t.Helper()
	job := builder.MakeImageJob(name).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	src := logs{}
	var nodes []string
	for i := range count {
		n := fmt.Sprintf("%s-node-%03d", name, i)
		nodes = append(nodes, n)
		var b strings.Builder
		for k := range images {
			id := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(n+fmt.Sprint(k))))
			b.WriteString(line("in use", "registry.example.com/"+id[7:27]+":v1", id, "", 0, ""))
		}
		src[podspec.PodName(job.Name, n)+"/remover"] = b.String()
	}
	finishedPods(t, ctx, job, nodes)
	job.Status.Phase, job.Status.Desired = eraserv1.PhaseCompleted, count
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	return job, nodes, src
}

// collectRetrying is collect with a reconciler whose writes may fail: a
// pass that fails is retried, as the controller's queue does.
func collectRetrying(t *testing.T, ctx context.Context, r *Reconciler, clk *clocktesting.FakeClock, job *eraserv1.ImageJob) map[string]nodereport.Node {
	t.Helper()
	for pass := 0; ; pass++ {
		if pass == 50 {
			t.Fatalf("report not complete after 50 passes: %+v", job.Status.Report)
		}
		clk.Step(passInterval)
		if _, err := r.Reconcile(ctx, requestOf(job)); err != nil {
			t.Logf("pass %d: %v", pass, err)
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

// checkAll fails unless every node is in the report, once (readReport
// catches twice), with its entries, and no other node is.
func checkAll(t *testing.T, job *eraserv1.ImageJob, got map[string]nodereport.Node, nodes []string, images int) {
	t.Helper()
	for _, n := range nodes {
		if g, ok := got[n]; !ok {
			t.Errorf("node %s not in the report", n)
		} else if len(g.Entries) != images {
			t.Errorf("node %s: %d entries, want %d", n, len(g.Entries), images)
		}
	}
	if len(got) != len(nodes) {
		t.Errorf("%d nodes in the report, want %d", len(got), len(nodes))
	}
	if rep := job.Status.Report; rep.Nodes != len(nodes) {
		t.Errorf("status.report.nodes = %d, want %d", rep.Nodes, len(nodes))
	}
}

// TestShardCreateTimedOutButSucceeded: the first shard's
// create times out although the server created it; the retry, with more
// nodes read since, finds it: the nodes it holds are written, the others
// go to the next shard.
func TestShardCreateTimedOutButSucceeded(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	job, nodes, src := writeJob(t, ctx, "timeout-ok", fetchBatch+50, 1)
	f := &faulty{Client: env.Client, tries: map[string]int{}, fail: func(name string, n int) (bool, bool) {
		return name == nodereport.ShardName(job.Name, 0) && n == 1, true
	}}
	r := NewReconciler(f, env.Client, src, clk, Options{Namespace: ns})
	checkAll(t, job, collectRetrying(t, ctx, r, clk, job), nodes, 1)
}

// TestShardFailsMidFlush: a flush of several shards
// whose second create fails; the retry writes the nodes not written yet,
// and none of the first shard's again.
func TestShardFailsMidFlush(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const images = 2500
	job, nodes, src := writeJob(t, ctx, "mid-flush", 30, images)
	f := &faulty{Client: env.Client, tries: map[string]int{}, fail: func(name string, n int) (bool, bool) {
		return name == nodereport.ShardName(job.Name, 1) && n == 1, false
	}}
	r := NewReconciler(f, env.Client, src, clk, Options{Namespace: ns})
	got := collectRetrying(t, ctx, r, clk, job)
	if f.tries[nodereport.ShardName(job.Name, 2)] == 0 {
		t.Fatalf("the flush wrote fewer than 3 shards (%v): the fault was not exercised", f.tries)
	}
	checkAll(t, job, got, nodes, images)
}

// TestShardRefusedForGood: the API server refuses one shard for good (as
// it refused one over 1 MiB); the report completes without that shard's
// nodes, counted as omitted, instead of retrying it for ever and keeping
// the run's pods.
func TestShardRefusedForGood(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const images = 2500
	job, nodes, src := writeJob(t, ctx, "refused", 30, images)
	refused := nodereport.ShardName(job.Name, 0)
	f := &faulty{Client: env.Client, tries: map[string]int{}, fail: func(string, int) (bool, bool) { return false, false },
		invalid: func(name string, n int) bool { return name == refused && n == 1 }}
	r := NewReconciler(f, env.Client, src, clk, Options{Namespace: ns})
	got := collectRetrying(t, ctx, r, clk, job)
	rep := job.Status.Report
	if rep.OmittedNodes == 0 || rep.Nodes == 0 || rep.Nodes+rep.OmittedNodes != len(nodes) || len(got) != rep.Nodes {
		t.Errorf("report: %d nodes, %d omitted, %d read back; want every one of %d counted", rep.Nodes, rep.OmittedNodes, len(got), len(nodes))
	}
	if f.tries[refused] == 0 {
		t.Fatal("the refused shard was never tried: the fault was not exercised")
	}
}

// TestLeftoverShardOfAnotherJob: a shard of an earlier
// job of the same name (another UID) is still there; it is not taken as
// this job's, and this job's nodes are in its report.
func TestLeftoverShardOfAnotherJob(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const name = "leftover"
	earlier := builder.MakeImageJob(name).Obj()
	earlier.UID = "00000000-0000-0000-0000-00000000dead"
	shards, err := nodereport.Split([]nodereport.Node{{Name: "ghost"}}, nodereport.ShardBudget)
	if err != nil {
		t.Fatal(err)
	}
	left := nodereport.ConfigMap(earlier, ns, 0, shards[0])
	if err := env.Client.Create(ctx, left); err != nil {
		t.Fatal(err)
	}
	job, nodes, src := writeJob(t, ctx, name, 3, 1)
	r := NewReconciler(env.Client, env.Client, src, clk, Options{Namespace: ns})
	got := collectRetrying(t, ctx, r, clk, job)
	checkAll(t, job, got, nodes, 1)
	var now corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(left), &now); err != nil || now.UID == left.UID {
		t.Errorf("the earlier job's shard was not replaced: %v", err)
	}
	for _, cm := range job.Status.Report.ConfigMaps {
		var shard corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm}, &shard); err != nil {
			t.Fatalf("shard %s in the status: %v", cm, err)
		}
		if shard.OwnerReferences[0].UID != job.UID {
			t.Errorf("shard %s in the status is owned by %s, not the job", cm, shard.OwnerReferences[0].UID)
		}
	}
}

// TestShardNameTakenByAnotherJob: a shard under this job's shard name that
// names another job (long names shortened alike) is left alone; this job's
// shard takes the next index.
func TestShardNameTakenByAnotherJob(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	const name = "taken"
	other := builder.MakeImageJob("another-job").Obj()
	other.UID = "00000000-0000-0000-0000-00000000beef"
	shards, err := nodereport.Split([]nodereport.Node{{Name: "ghost"}}, nodereport.ShardBudget)
	if err != nil {
		t.Fatal(err)
	}
	taken := nodereport.ConfigMap(other, ns, 0, shards[0])
	taken.Name = nodereport.ShardName(name, 0)
	if err := env.Client.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	job, nodes, src := writeJob(t, ctx, name, 3, 1)
	r := NewReconciler(env.Client, env.Client, src, clk, Options{Namespace: ns})
	checkAll(t, job, collectRetrying(t, ctx, r, clk, job), nodes, 1)
	if got := job.Status.Report.ConfigMaps; len(got) != 1 || got[0] != nodereport.ShardName(name, 1) {
		t.Errorf("status.report.configMaps = %v, want the next index", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(taken), &corev1.ConfigMap{}); err != nil {
		t.Errorf("the other job's shard: %v", err)
	}
}
