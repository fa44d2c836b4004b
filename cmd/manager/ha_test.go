package main_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestTwoReplicas: with leader election, two managers run one job, not two.
func TestTwoReplicas(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "eraser-ha"
	ensureNamespace(t, ns)
	node := builder.MakeNode("ha-node").Obj()
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, node) })
	for range 2 {
		managerIn(ns).Start(t, flowConfig)
	}
	list := builder.MakeImageList("ha-list").Images("busybox").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, list) })
	var pods corev1.PodList
	testenv.WaitFor(t, 60*time.Second, "the worker pod", func() bool {
		return env.Client.List(ctx, &pods, client.InNamespace(ns)) == nil && len(pods.Items) > 0
	})
	time.Sleep(3 * time.Second) // a second replica, if active, would have acted by now
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: "ha-list"}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || len(pods.Items) != 1 {
		t.Errorf("%d jobs and %d pods for one ImageList on one node", len(jobs.Items), len(pods.Items))
	}
	lease := &metav1.PartialObjectMetadata{}
	lease.SetGroupVersionKind(coordinationLease)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: manager.LeaderElectionID}, lease); err != nil {
		t.Errorf("no leader lease: %v", err)
	}
}

var coordinationLease = coordinationv1.SchemeGroupVersion.WithKind("Lease")
