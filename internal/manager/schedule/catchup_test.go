package schedule

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// jobsIn are the scheduled jobs whose data is in the test's namespace, and
// deletes them when the test ends.
func jobsIn(t *testing.T, ctx context.Context, ns string) []eraserv1.ImageJob {
	t.Helper()
	var out []eraserv1.ImageJob
	for _, j := range scheduledJobs(t, ctx) {
		if _, err := jobdata.Get(ctx, env.Client, ns, &j); err == nil {
			out = append(out, j)
			t.Cleanup(func() { _ = env.Client.Delete(ctx, &j) })
		}
	}
	return out
}

// setReady writes the node's Ready condition, as its kubelet would.
func setReady(t *testing.T, ctx context.Context, name string, ready bool) {
	t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// finishRun plays the ImageJob controller: the job ran on targets and ends
// Completed, the nodes at the failed indexes having failed.
func finishRun(t *testing.T, ctx context.Context, ns string, job *eraserv1.ImageJob, targets []string, failed string, at time.Time) {
	t.Helper()
	var nodes jobdata.Nodes
	for _, n := range targets {
		nodes.Targets = append(nodes.Targets, nodefilter.Target{Name: n, OS: "linux"})
	}
	if err := jobdata.CreateNodes(ctx, env.Client, ns, job, nodes); err != nil {
		t.Fatal(err)
	}
	end := metav1.NewTime(at)
	job.Status = eraserv1.ImageJobStatus{Phase: eraserv1.PhaseCompleted, CompletionTime: &end, Started: len(targets)}
	if failed != "" {
		job.Status.FailedIndexes = map[string]string{"PodFailed": failed}
	}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// catchUpBatch is manager.scheduling.catchUpBatch's default, which the
// tests' configurations leave.
const catchUpBatch = time.Minute

// TestCatchUp: a node that failed in the scheduled run, and later a node
// that was NotReady during it and one that joined after it, each get a
// catch-up run on those nodes alone, batched, without moving the rhythm;
// a node caught up is not run again before the next scheduled run.
func TestCatchUp(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "catchup-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"cu-a", "cu-b", "cu-c", "cu-late"} {
		if err := env.Client.Create(ctx, builder.MakeNode(n).Obj()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, builder.MakeNode(n).Obj()) })
	}
	setReady(t, ctx, "cu-late", false)
	const doc = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true}}\ncomponents: {collector: {enabled: true}}\n"
	// A month past the API server's clock: the nodes it dates now are
	// older than the minimum image age, as nodes that were there before a
	// run are. Slot job names are cluster-wide: no other test's day.
	clk := clocktesting.NewFakeClock(time.Now().Add(30 * 24 * time.Hour).Truncate(time.Hour))
	r := NewReconciler(env.Client, record.NewFakeRecorder(100), clk, store(t, doc), nil, ns, "")
	reconcileOnce := reconciler(t, ctx, r)
	jobsNamed := func(prefix string) []eraserv1.ImageJob {
		var out []eraserv1.ImageJob
		for _, j := range jobsIn(t, ctx, ns) {
			if strings.HasPrefix(j.Name, prefix) {
				out = append(out, j)
			}
		}
		return out
	}
	confinedTo := func(j *eraserv1.ImageJob) []string {
		t.Helper()
		d, err := jobdata.Get(ctx, env.Client, ns, j)
		if err != nil {
			t.Fatal(err)
		}
		if j.Annotations[eraserv1.AnnotationCatchUp] != "true" {
			t.Errorf("job %s is not marked a catch-up: %v", j.Name, j.Annotations)
		}
		return d.Nodes
	}

	reconcileOnce()
	slot := jobsNamed("imagejob-scheduled-")
	if len(slot) != 1 {
		t.Fatalf("%d scheduled jobs, want 1", len(slot))
	}
	// cu-late was NotReady: not a target. cu-c failed.
	finishRun(t, ctx, ns, &slot[0], []string{"cu-a", "cu-b", "cu-c"}, "2", clk.Now().Add(time.Hour))
	clk.Step(time.Hour)
	if wait := reconcileOnce(); wait != catchUpBatch {
		t.Errorf("with cu-c due: next look in %v, want the batch's %v", wait, catchUpBatch)
	}
	if n := len(jobsNamed("imagejob-scheduled-catchup-")); n != 0 {
		t.Fatalf("%d catch-up jobs before the batch window passed", n)
	}
	clk.Step(catchUpBatch)
	reconcileOnce()
	catchUps := jobsNamed("imagejob-scheduled-catchup-")
	if len(catchUps) != 1 {
		t.Fatalf("%d catch-up jobs, want 1", len(catchUps))
	}
	if diff := cmp.Diff([]string{"cu-c"}, confinedTo(&catchUps[0])); diff != "" {
		t.Errorf("the catch-up's nodes (-want +got):\n%s", diff)
	}
	finishRun(t, ctx, ns, &catchUps[0], []string{"cu-c"}, "", clk.Now())

	// cu-late becomes Ready and cu-new joins: one catch-up for both.
	setReady(t, ctx, "cu-late", true)
	if err := env.Client.Create(ctx, builder.MakeNode("cu-new").Obj()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, builder.MakeNode("cu-new").Obj()) })
	reconcileOnce()
	clk.Step(catchUpBatch)
	reconcileOnce()
	catchUps = jobsNamed("imagejob-scheduled-catchup-")
	if len(catchUps) != 2 {
		t.Fatalf("%d catch-up jobs, want 2", len(catchUps))
	}
	// Listed by name, which ends in the creation's unix time.
	second := catchUps[1]
	if diff := cmp.Diff([]string{"cu-late", "cu-new"}, confinedTo(&second)); diff != "" {
		t.Errorf("the second catch-up's nodes (-want +got):\n%s", diff)
	}
	// It fails on cu-new: tried within the interval, it waits for the
	// next scheduled run. The rhythm is the scheduled run's: 6h after its end.
	finishRun(t, ctx, ns, &second, []string{"cu-late", "cu-new"}, "1", clk.Now())
	wait := reconcileOnce()
	clk.Step(2 * catchUpBatch)
	reconcileOnce()
	if n := len(jobsNamed("imagejob-scheduled-catchup-")); n != 2 {
		t.Errorf("%d catch-up jobs after cu-new failed its catch-up, want still 2", n)
	}
	// The scheduled run ended at 11:00, the clock is at 11:02.
	if want := 6*time.Hour - 2*catchUpBatch; wait != want {
		t.Errorf("the next scheduled run in %v, want %v (6h after the scheduled run's end)", wait, want)
	}
}

// TestCatchUpWaitsForNewNodes: a node that joins after the scheduled run is
// not caught up while it is younger than the minimum image age (every image
// on it is younger); once it is that old, and a batch later, it is. With
// catch-up runs off, a node the run missed waits for the next scheduled run.
func TestCatchUpWaitsForNewNodes(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const minAge = 10 * time.Minute // manager.retention.minAge's default
	start := func(t *testing.T, ns, doc string, nodes ...string) (*clocktesting.FakeClock, func() time.Duration) {
		t.Helper()
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if err := env.Client.Create(ctx, builder.MakeNode(n).Obj()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, builder.MakeNode(n).Obj()) })
		}
		// The API server's clock, to its second: the nodes are created now.
		clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
		r := NewReconciler(env.Client, record.NewFakeRecorder(100), clk, store(t, doc), nil, ns, "")
		return clk, reconciler(t, ctx, r)
	}
	jobs := func(t *testing.T, ns, prefix string) []eraserv1.ImageJob {
		var out []eraserv1.ImageJob
		for _, j := range jobsIn(t, ctx, ns) {
			if strings.HasPrefix(j.Name, prefix) {
				out = append(out, j)
			}
		}
		return out
	}

	t.Run("young node", func(t *testing.T) {
		ns := "catchup-young"
		const doc = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true}}\ncomponents: {collector: {enabled: true}}\n"
		clk, reconcileOnce := start(t, ns, doc, "cy-a", "cy-b")
		reconcileOnce()
		slot := jobs(t, ns, "imagejob-scheduled-")
		if len(slot) != 1 {
			t.Fatalf("%d scheduled jobs, want 1", len(slot))
		}
		finishRun(t, ctx, ns, &slot[0], []string{"cy-a", "cy-b"}, "", clk.Now())
		reconcileOnce()
		if err := env.Client.Create(ctx, builder.MakeNode("cy-new").Obj()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, builder.MakeNode("cy-new").Obj()) })
		// The schedule looks again when the node comes of age, not before
		// the next scheduled run.
		if wait := reconcileOnce(); wait < minAge-time.Minute || wait > minAge+time.Minute {
			t.Errorf("with a new node: next look in %v, want about the minimum age, %v", wait, minAge)
		}
		clk.Step(2 * catchUpBatch)
		reconcileOnce()
		if n := len(jobs(t, ns, "imagejob-scheduled-catchup-")); n != 0 {
			t.Fatalf("%d catch-up jobs for a node younger than the minimum age", n)
		}
		clk.Step(minAge)
		if wait := reconcileOnce(); wait != catchUpBatch {
			t.Errorf("with the node of age: next look in %v, want the batch's %v", wait, catchUpBatch)
		}
		clk.Step(catchUpBatch)
		reconcileOnce()
		catchUps := jobs(t, ns, "imagejob-scheduled-catchup-")
		if len(catchUps) != 1 {
			t.Fatalf("%d catch-up jobs once the node is old enough, want 1", len(catchUps))
		}
		d, err := jobdata.Get(ctx, env.Client, ns, &catchUps[0])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"cy-new"}, d.Nodes); diff != "" {
			t.Errorf("the catch-up's nodes (-want +got):\n%s", diff)
		}
	})

	t.Run("switched off", func(t *testing.T) {
		ns := "catchup-off"
		const doc = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true, catchUp: false}}\ncomponents: {collector: {enabled: true}}\n"
		clk, reconcileOnce := start(t, ns, doc, "co-a", "co-b")
		reconcileOnce()
		slot := jobs(t, ns, "imagejob-scheduled-")
		if len(slot) != 1 {
			t.Fatalf("%d scheduled jobs, want 1", len(slot))
		}
		// co-b fails; co-new joins. A day later neither has a run of its own.
		finishRun(t, ctx, ns, &slot[0], []string{"co-a", "co-b"}, "1", clk.Now())
		if err := env.Client.Create(ctx, builder.MakeNode("co-new").Obj()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, builder.MakeNode("co-new").Obj()) })
		reconcileOnce()
		clk.Step(time.Hour)
		wait := reconcileOnce()
		clk.Step(catchUpBatch)
		reconcileOnce()
		if n := len(jobs(t, ns, "imagejob-scheduled-catchup-")); n != 0 {
			t.Errorf("%d catch-up jobs with catch-up runs off", n)
		}
		if want := 5 * time.Hour; wait != want {
			t.Errorf("next look in %v, want the next scheduled run's %v", wait, want)
		}
	})
}
