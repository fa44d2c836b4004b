package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/manager/schedule"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// A day between scheduled runs, and none at start: any scheduled run in
// this test is a run-now run.
const runNowConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  imageJob:
    cleanup: {delayOnSuccess: 0s, keepReportFor: 0s}
  scheduling: {repeatInterval: 24h, beginImmediately: false}
components:
  collector: {enabled: true}
`

// annotateRunNow sets the annotation as `kubectl annotate` does.
func annotateRunNow(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + eraserv1.AnnotationRunNow + `":"true"}}}`)
	if err := env.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// waitEvent waits for an Event of the reason about the object named name,
// whose message contains text.
func waitEvent(t *testing.T, ns, name, reason, text string) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, reason+" about "+name, func() bool {
		for _, e := range env.Events(t, ns, name, reason) {
			if strings.Contains(e.Message, text) {
				return true
			}
		}
		return false
	})
}

// TestRunNowFlow drives the real manager binary, with its watches and its
// namespace-restricted cache, through run-now on an ImageList and on the
// schedule: each starts a run once, and is refused while that run goes.
func TestRunNowFlow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-runnow"
	ensureNamespace(t, ns)
	node := builder.MakeNode("runnow-node").Obj()
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	managerIn(ns).Start(t, runNowConfig)

	const name = "rerun-flow"
	list := builder.MakeImageList(name).Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	listJobs := func() []eraserv1.ImageJob {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: name}); err != nil {
			t.Fatal(err)
		}
		return jobs.Items
	}
	settled := func(what string) *eraserv1.ImageList {
		t.Helper()
		testenv.WaitFor(t, 60*time.Second, what, func() bool {
			kubeletIn(t, ctx, ns)
			return env.Client.Get(ctx, client.ObjectKey{Name: name}, list) == nil && list.Status.Timestamp != nil && len(listJobs()) == 0
		})
		return list.DeepCopy()
	}
	first := settled("the first run, recorded and cleaned up")

	// Run now: a job for the unchanged spec, its pods, the request consumed.
	time.Sleep(time.Second) // the re-run's completion time, to the second, is after the first's
	annotateRunNow(t, ctx, list)
	testenv.WaitFor(t, 30*time.Second, "the re-run's pods", func() bool {
		var pods corev1.PodList
		return env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil && len(pods.Items) == 1 && len(listJobs()) == 1
	})
	waitEvent(t, metav1.NamespaceDefault, name, eraserv1.ReasonRunNow, "generation 1")
	rerun := listJobs()[0].Name
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, list); err != nil || runnow.Requested(list) || list.Generation != 1 {
		t.Errorf("after run-now: annotations %v, generation %d, %v", list.Annotations, list.Generation, err)
	}

	// Again while the re-run goes (its pods left pending): refused.
	annotateRunNow(t, ctx, list)
	waitEvent(t, metav1.NamespaceDefault, name, eraserv1.ReasonRunNowRefused, rerun)
	testenv.WaitFor(t, 10*time.Second, "the refused request to be consumed", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Name: name}, list) == nil && !runnow.Requested(list)
	})
	if jobs := listJobs(); len(jobs) != 1 || jobs[0].Name != rerun {
		t.Errorf("jobs after a refused run-now: %d", len(jobs))
	}

	// The re-run's results are recorded as any run's.
	got := settled("the re-run, recorded and cleaned up")
	if !got.Status.Timestamp.After(first.Status.Timestamp.Time) || got.Status.Success != 1 {
		t.Errorf("status after the re-run %+v; the first run's timestamp %v", got.Status, first.Status.Timestamp)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition after the re-run: %+v", c)
	}

	// The schedule: run-now on its state ConfigMap starts a scheduled run a
	// day early, and is refused while that run goes.
	state := &corev1.ConfigMap{}
	stateKey := client.ObjectKey{Namespace: ns, Name: schedule.StateName}
	testenv.WaitFor(t, 30*time.Second, "the schedule's state ConfigMap", func() bool {
		return env.Client.Get(ctx, stateKey, state) == nil
	})
	scheduled := func() []eraserv1.ImageJob {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
			t.Fatal(err)
		}
		return jobs.Items
	}
	if n := len(scheduled()); n != 0 {
		t.Fatalf("%d scheduled jobs before run-now", n)
	}
	annotateRunNow(t, ctx, state)
	testenv.WaitFor(t, 30*time.Second, "a scheduled job", func() bool { return len(scheduled()) == 1 })
	job := scheduled()[0].Name
	waitEvent(t, ns, schedule.StateName, eraserv1.ReasonRunNow, job)
	testenv.WaitFor(t, 10*time.Second, "the request to be consumed", func() bool {
		return env.Client.Get(ctx, stateKey, state) == nil && !runnow.Requested(state)
	})
	annotateRunNow(t, ctx, state)
	waitEvent(t, ns, schedule.StateName, eraserv1.ReasonRunNowRefused, job)
	testenv.WaitFor(t, 10*time.Second, "the refused request to be consumed", func() bool {
		return env.Client.Get(ctx, stateKey, state) == nil && !runnow.Requested(state)
	})
	if n := len(scheduled()); n != 1 {
		t.Errorf("%d scheduled jobs after a refused run-now, want 1", n)
	}
	// The run ends and is on record as the schedule's last.
	testenv.WaitFor(t, 60*time.Second, "the scheduled run's end on record", func() bool {
		kubeletIn(t, ctx, ns)
		return env.Client.Get(ctx, stateKey, state) == nil && state.Data["lastEnd"] != "" && len(scheduled()) == 0
	})
}
