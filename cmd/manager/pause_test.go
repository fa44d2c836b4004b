package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// A scheduled run in waves of one node, paused after its first wave.
const pauseConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  imageJob:
    maxConcurrentNodes: 1
    cleanup: {delayOnSuccess: 0s}
  scheduling: {repeatInterval: 24h, beginImmediately: true}
components:
  collector: {enabled: true}
  scanner: {enabled: false}
`

// TestPauseFlow drives the real manager binary: paused during a scheduled
// run, the run creates no further wave once its running worker finishes,
// and a new ImageList starts nothing; both say Paused, and so does the
// eraser_paused gauge. Resumed, the run goes on from the node it stopped
// at and completes, and the list runs.
func TestPauseFlow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-pause-flow"
	ensureNamespace(t, ns)
	nodes := []string{"pause-a", "pause-b", "pause-c"}
	for _, n := range nodes {
		node := builder.MakeNode(n).Obj()
		if err := env.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	}
	deleteScheduledJobs(t) // registered first, so run after the manager stops
	metrics := testenv.FreePort(t)
	managerIn(ns).Start(t, pauseConfig, "--metrics-bind-address="+metrics)

	scheduled := func() *eraserv1.ImageJob {
		var jobs eraserv1.ImageJobList
		if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
			t.Fatal(err)
		}
		for i := range jobs.Items {
			if strings.HasPrefix(jobs.Items[i].Name, "imagejob-scheduled-") {
				return &jobs.Items[i]
			}
		}
		return nil
	}
	workers := func() []corev1.Pod {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{podspec.LabelJob}); err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	testenv.WaitFor(t, time.Minute, "the scheduled run's first worker", func() bool { return len(workers()) == 1 })

	// Paused while the first worker runs: it finishes, nothing follows.
	if err := env.Client.Create(ctx, pause.New(ns, "change freeze", "pause-flow test")); err != nil {
		t.Fatal(err)
	}
	paused := func(cs []metav1.Condition) bool {
		c := meta.FindStatusCondition(cs, eraserv1.ConditionReady)
		return c != nil && c.Reason == eraserv1.ReasonPaused && strings.Contains(c.Message, "change freeze")
	}
	var job *eraserv1.ImageJob
	testenv.WaitFor(t, time.Minute, "the run, its first node done, to say Paused", func() bool {
		kubeletIn(t, ctx, ns)
		job = scheduled()
		return job != nil && job.Status.Succeeded == 1 && paused(job.Status.Conditions)
	})
	if n := len(workers()); n != 1 {
		t.Fatalf("%d worker pods while paused: the pass that judged the first node done created more", n)
	}
	list := builder.MakeImageList("pause-flow").Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	testenv.WaitFor(t, time.Minute, "the new ImageList to say Paused", func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(list), list) == nil && paused(list.Status.Conditions)
	})
	var listJobs eraserv1.ImageJobList
	if err := env.Client.List(ctx, &listJobs, client.MatchingLabels{eraserv1.LabelImageList: list.Name}); err != nil || len(listJobs.Items) != 0 {
		t.Fatalf("the ImageList got %d jobs while paused (%v)", len(listJobs.Items), err)
	}
	testenv.WaitFor(t, 30*time.Second, "eraser_paused 1", func() bool {
		_, body, err := get("http://" + metrics + "/metrics")
		return err == nil && strings.Contains(body, "\neraser_paused 1")
	})
	if n := len(workers()); n != 1 {
		t.Fatalf("%d worker pods while paused", n)
	}

	// Resumed: the run goes on from the second node and completes; the
	// list runs.
	if err := env.Client.Delete(ctx, pause.New(ns, "", "")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, "the scheduled run to complete after the resume", func() bool {
		kubeletIn(t, ctx, ns)
		j := &eraserv1.ImageJob{}
		return env.Client.Get(ctx, client.ObjectKey{Name: job.Name}, j) == nil && j.Status.Phase == eraserv1.PhaseCompleted &&
			j.Status.Succeeded == len(nodes)
	})
	testenv.WaitFor(t, 2*time.Minute, "the ImageList to run after the resume", func() bool {
		kubeletIn(t, ctx, ns)
		return env.Client.Get(ctx, client.ObjectKeyFromObject(list), list) == nil && list.Status.Timestamp != nil
	})
	testenv.WaitFor(t, 30*time.Second, "eraser_paused 0", func() bool {
		_, body, err := get("http://" + metrics + "/metrics")
		return err == nil && strings.Contains(body, "\neraser_paused 0")
	})
	t.Logf("resumed: run %s completed on %d nodes, list %s ran", job.Name, len(nodes), list.Name)
}
