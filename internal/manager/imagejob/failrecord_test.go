package imagejob

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

func TestFailureRecord(t *testing.T) {
	targets := func(n int) []nodefilter.Target {
		out := make([]nodefilter.Target, n)
		for i := range out {
			out[i] = nodefilter.Target{Name: fmt.Sprintf("n%d", i), OS: "linux"}
		}
		return out
	}
	failed := func(reason string, nodes ...int) map[string]eraserv1.NodeFailure {
		out := map[string]eraserv1.NodeFailure{}
		for _, i := range nodes {
			out[fmt.Sprintf("n%d", i)] = eraserv1.NodeFailure{Node: fmt.Sprintf("n%d", i), Reason: reason, Message: restoredMessage}
		}
		return out
	}
	merge := func(ms ...map[string]eraserv1.NodeFailure) map[string]eraserv1.NodeFailure {
		out := map[string]eraserv1.NodeFailure{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	cases := map[string]struct {
		nodes    int
		failures map[string]eraserv1.NodeFailure
		want     map[string]string
	}{
		"no failure, no record": {nodes: 3, failures: map[string]eraserv1.NodeFailure{}},
		"runs and singles, by reason": {nodes: 10,
			failures: merge(failed(eraserv1.ReasonStartTimeout, 0, 1, 2, 3, 7), failed(eraserv1.ReasonPodFailed, 5), failed(eraserv1.ReasonRemovalsFailed, 8, 9)),
			want:     map[string]string{eraserv1.ReasonStartTimeout: "0-3,7", eraserv1.ReasonPodFailed: "5", eraserv1.ReasonRemovalsFailed: "8-9"}},
		"a failure of a node not in the list is not recorded": {nodes: 2,
			failures: merge(failed(eraserv1.ReasonCreateFailed, 1), map[string]eraserv1.NodeFailure{"gone": {Node: "gone", Reason: eraserv1.ReasonPodMissing}}),
			want:     map[string]string{eraserv1.ReasonCreateFailed: "1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ts := targets(tc.nodes)
			rec := encodeFailures(ts, tc.failures)
			if diff := cmp.Diff(tc.want, rec); diff != "" {
				t.Fatalf("record (-want +got):\n%s", diff)
			}
			want := map[string]eraserv1.NodeFailure{}
			for node, f := range tc.failures {
				if strings.HasPrefix(node, "n") {
					want[node] = eraserv1.NodeFailure{Node: node, Reason: f.Reason, Message: restoredMessage}
				}
			}
			if diff := cmp.Diff(want, decodeFailures(ts, rec)); diff != "" {
				t.Errorf("restored (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRestartKeepsFailuresBeyondTheNamed: 36 of 40 nodes time out (their
// pods deleted), more than the 32 the status names; the manager restarts
// while 4 nodes still run. The restarted manager keeps every failure's
// reason (none becomes PodMissing) and announces none of them again.
func TestRestartKeepsFailuresBeyondTheNamed(t *testing.T) {
	f := newFixture(t)
	f.manyNodes(40, "rf")
	f.job("many", podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m}}", "*")
	f.reconcile("many")
	f.reconcile("many")
	for _, p := range f.pods("many") {
		if p.Spec.NodeName >= "rf-036" {
			f.runPod(&p)
		}
	}
	f.clock.Step(3 * time.Minute)
	f.reconcile("many")
	if job := f.get("many"); job.Status.Failed != 36 || job.Status.Phase != eraserv1.PhaseRunning {
		t.Fatalf("after the timeouts: %+v", job.Status)
	}
	// The kubelet ends the deleted pods.
	for _, p := range f.pods("many") {
		if p.DeletionTimestamp != nil {
			if err := env.Client.Delete(f.ctx, &p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}

	f.rec = record.NewFakeRecorder(1000)
	f.r = f.newReconciler()
	f.reconcile("many")
	for _, p := range f.pods("many") {
		f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
	}
	f.reconcile("many")
	job := f.get("many")
	if job.Status.Phase != eraserv1.PhaseFailed || job.Status.Failed != 36 || job.Status.Succeeded != 4 {
		t.Fatalf("after the restart: %+v", job.Status)
	}
	if diff := cmp.Diff(map[string]string{eraserv1.ReasonStartTimeout: "0-35"}, job.Status.FailedIndexes); diff != "" {
		t.Errorf("failure record (-want +got):\n%s", diff)
	}
	for _, nf := range job.Status.FailedNodes {
		if nf.Reason != eraserv1.ReasonStartTimeout {
			t.Errorf("failed node %+v, want %s", nf, eraserv1.ReasonStartTimeout)
		}
	}
	close(f.rec.Events)
	for e := range f.rec.Events {
		if strings.Contains(e, "NodeFailed") {
			t.Errorf("a failure announced again after the restart: %s", e)
		}
	}
}
