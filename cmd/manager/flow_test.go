package main_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

const flowNS = "eraser-flow"

const flowConfig = `apiVersion: eraser.sh/v1alpha3
kind: EraserConfig
manager:
  imageJob:
    cleanup: {delayOnSuccess: 0s}
`

// kubeletIn plays the node agents of a manager in namespace ns: every
// pending worker pod succeeds, the remover having removed 2 images.
func kubeletIn(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	if _, err := (managertest.FakeKubelet{Client: env.Client, Namespace: ns}).Finish(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func waitList(t *testing.T, ctx context.Context, what string, cond func(*eraserv1.ImageList) bool) *eraserv1.ImageList {
	t.Helper()
	list := &eraserv1.ImageList{}
	testenv.WaitFor(t, 60*time.Second, what, func() bool {
		kubeletIn(t, ctx, flowNS)
		return env.Client.Get(ctx, client.ObjectKey{Name: "imagelist"}, list) == nil && cond(list)
	})
	return list
}

func jobPods(t *testing.T, ctx context.Context) map[string]int {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(flowNS)); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		out[p.Labels[podspec.LabelJob]]++
	}
	return out
}

// TestImageListFlow drives the real manager binary through upstream's
// ImageList scenarios on the real API server, playing the kubelet.
func TestImageListFlow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ensureNamespace(t, flowNS)
	for _, n := range []*corev1.Node{
		builder.MakeNode("flow-a").Obj(), builder.MakeNode("flow-b").Obj(),
		builder.MakeNode("flow-skip").Label(config.CleanupFilterLabel, "").Obj(),
	} {
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, n) })
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: flowNS, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: flowConfig}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	excl := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: flowNS, Name: "keep-system", Labels: map[string]string{"eraser.sh/exclude.list": "true"}},
		Data: map[string]string{"list.json": `{"excluded":["registry.k8s.io/*"]}`}}
	if err := env.Client.Create(ctx, excl); err != nil {
		t.Fatal(err)
	}
	mgr := managerIn(flowNS).Start(t, flowConfig)

	// imagelist_rm_images: a job on every eligible node; the node labelled
	// eraser.sh/cleanup.filter gets no pod (imagelist_skip_nodes).
	list := builder.MakeImageList("imagelist").Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	testenv.WaitFor(t, 60*time.Second, "two worker pods", func() bool {
		return env.Client.List(ctx, &pods, client.InNamespace(flowNS)) == nil && len(pods.Items) == 2
	})
	for _, p := range pods.Items {
		if p.Spec.NodeName == "flow-skip" {
			t.Error("a pod on the node labelled eraser.sh/cleanup.filter")
		}
		mounts := fmt.Sprint(p.Spec.Containers[0].VolumeMounts)
		if !strings.Contains(mounts, "exclude-keep-system") {
			t.Errorf("exclusion list not mounted: %s", mounts)
		}
	}
	got := waitList(t, ctx, "the first run's results", func(l *eraserv1.ImageList) bool { return l.Status.ObservedGeneration == 1 })
	if got.Status.Success != 2 || got.Status.Failed != 0 || got.Status.Skipped != 1 || got.Status.Timestamp == nil ||
		got.Status.Results == nil || got.Status.Results.Removed != 4 {
		t.Errorf("ImageList status %+v results %+v", got.Status, got.Status.Results)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition %+v", c)
	}
	// The report: the pods' logs cannot be read here (no kubelet), so each
	// node is in it with its counts and the reason; then the pods go
	// (delayOnSuccess 0s) while the job and its report stay (keepReportFor).
	var job eraserv1.ImageJob
	testenv.WaitFor(t, 30*time.Second, "the job's report to be complete and its pods cleaned up", func() bool {
		var jobs eraserv1.ImageJobList
		if env.Client.List(ctx, &jobs) != nil || len(jobs.Items) != 1 {
			return false
		}
		job = jobs.Items[0]
		rep := job.Status.Report
		return rep != nil && rep.Complete && len(jobPods(t, ctx)) == 0
	})
	// Every node of the job is in the report: the two that ran, and the
	// one the cleanup filter skipped, with why.
	if rep := job.Status.Report; rep.Nodes != 3 || len(rep.ConfigMaps) != 1 || rep.Namespace != flowNS {
		t.Errorf("status.report %+v", rep)
	}
	shards, err := reportshards.Shards(ctx, env.Client, flowNS, &job)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("report nodes %+v: %v", nodes, err)
	}
	for _, n := range nodes {
		if n.Name == "flow-skip" {
			if n.Reason != "Skipped/CleanupFilter" || n.Failed {
				t.Errorf("report of the skipped node: %+v", n)
			}
			continue
		}
		if n.Counts["removed"] != 2 || !strings.Contains(n.Unavailable, "reading the log") {
			t.Errorf("report of node %s: %+v", n.Name, n)
		}
	}

	// imagelist_change: an edit starts a new job.
	got.Spec.Images = []string{"*"}
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	waitList(t, ctx, "the edit's run", func(l *eraserv1.ImageList) bool { return l.Status.ObservedGeneration == 2 })

	// An invalid configuration is refused with an Event, the old one stays.
	cm.Data[config.ConfigKey] = "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {successRatio: 7}}\n"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "an InvalidConfig event", func() bool {
		var events corev1.EventList
		if env.Client.List(ctx, &events, client.InNamespace(flowNS)) != nil {
			return false
		}
		for _, e := range events.Items {
			if e.Reason == "InvalidConfig" && strings.Contains(e.Message, "manager.imageJob.successRatio") {
				return true
			}
		}
		return false
	})

	// Restart mid-job: the new manager adopts the running job; no second
	// job, no duplicate pods.
	got = waitList(t, ctx, "the list", func(*eraserv1.ImageList) bool { return true })
	got.Spec.Images = []string{"docker.io/library/nginx:latest"}
	if err := env.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the third run's pods", func() bool { return len(jobPods(t, ctx)) == 1 })
	_ = mgr.Cmd.Process.Signal(syscall.SIGKILL)
	mgr.WaitExit(t, 30*time.Second)
	managerIn(flowNS).Start(t, flowConfig)
	waitList(t, ctx, "the third run, after a restart", func(l *eraserv1.ImageList) bool { return l.Status.ObservedGeneration == 3 })
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Status.Succeeded+j.Status.Failed > 2 {
			t.Errorf("job %s counted %d nodes for 2", j.Name, j.Status.Succeeded+j.Status.Failed)
		}
	}
}
