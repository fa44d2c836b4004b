package imagejob

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/imagejob/wave"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
	"github.com/google/go-cmp/cmp"
)

// TestFailedPassFreesItsNodes drives each step of a pass that can fail
// after the wave took its nodes in the queue: the exclusion lists cannot be
// read, the reference index has not synced, the pod cannot be built. Each
// time, another run then creates its pods on the same nodes at its first
// pass: nothing of the failed pass holds them.
func TestFailedPassFreesItsNodes(t *testing.T) {
	const noRefs = "apiVersion: eraser.sh/v1alpha3\nmanager: {retention: {protectReferenced: false}}\n"
	cases := map[string]struct {
		// doc is the failing run's configuration.
		doc string
		// fault breaks the step; it returns what mends it.
		fault func(f *fixture, lists *atomic.Bool) func()
		// fails is whether the run fails (rather than retrying the pass).
		fails bool
	}{
		"the exclusion lists cannot be read": {
			doc: noRefs,
			fault: func(_ *fixture, lists *atomic.Bool) func() {
				lists.Store(true)
				return func() { lists.Store(false) }
			},
		},
		"the reference index has not synced": {
			doc: baseConfig,
			fault: func(f *fixture, _ *atomic.Bool) func() {
				f.refs.mu.Lock()
				f.refs.unsynced = true
				f.refs.mu.Unlock()
				return func() {}
			},
		},
		"the pod cannot be built": {
			doc:   "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'npipe://./pipe/containerd-containerd'}, retention: {protectReferenced: false}}\n",
			fault: func(*fixture, *atomic.Bool) func() { return func() {} },
			fails: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var failLists atomic.Bool
			c := failingLists{Client: f.cached, fail: &failLists}
			f.r = NewReconciler(c, env.Client, f.stores, f.rec, f.clock, nil, Options{Namespace: f.ns, LogLevel: "info", References: &f.refs})
			f.manyNodes(2, "freed")
			f.job("broken", podspec.KindManual, tc.doc, "*")
			mend := tc.fault(f, &failLists)
			for range 2 {
				f.clock.Step(passInterval)
				f.settle()
				_, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "broken"}})
				if tc.fails && err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
			}
			broken := f.get("broken")
			if failed := broken.Status.Phase == eraserv1.PhaseFailed; failed != tc.fails {
				t.Fatalf("the broken run's phase %q, want failed %v", broken.Status.Phase, tc.fails)
			}
			if n := len(f.pods("broken")); n != 0 {
				t.Fatalf("the broken run created %d pods", n)
			}
			mend()
			f.job("next", podspec.KindManual, noRefs, "*")
			f.reconcile("next")
			f.reconcile("next")
			next := f.get("next")
			if n := len(f.pods("next")); n != 2 || next.Status.Waiting != 0 {
				t.Errorf("the next run has %d pods and %d nodes waiting (behind %q), want pods on both nodes",
					n, next.Status.Waiting, next.Status.QueuedBehind)
			}
			if tc.fails {
				f.r.queue.mu.Lock()
				defer f.r.queue.mu.Unlock()
				for node, job := range f.r.queue.claims {
					if job == "broken" {
						t.Errorf("the failed run still claims %s", node)
					}
				}
				for node, w := range f.r.queue.waits {
					if _, ok := w["broken"]; ok {
						t.Errorf("the failed run still waits for %s", node)
					}
				}
			}
		})
	}
}

// failingLists is the manager's client whose ConfigMap lists fail while
// fail is set, as when the API server does not answer.
type failingLists struct {
	client.Client
	fail *atomic.Bool
}

func (c failingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.ConfigMapList); ok && c.fail.Load() {
		return errors.New("injected: the API server is unavailable")
	}
	return c.Client.List(ctx, list, opts...)
}

// trimmedAt is the time the trimmed-pod tests judge at.
var trimmedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func trimmedPod() *builder.PodWrapper {
	return builder.MakePod("p-a", "a", trimmedAt.Add(-time.Minute))
}

// TestTrimmedPodsJudgedAlike: the manager's cache trims pods
// (cacheopts.TrimPod); every pod is judged the same trimmed as whole.
func TestTrimmedPodsJudgedAlike(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"pending":              trimmedPod().Waiting(podspec.RemoverContainer, "ImagePullBackOff").Obj(),
		"old":                  builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Obj(),
		"running":              trimmedPod().Running(trimmedAt.Add(-2 * time.Hour)).Obj(),
		"succeeded":            trimmedPod().Phase(corev1.PodSucceeded).Terminated(podspec.RemoverContainer, 0, string((&workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 3}}).Encode())).Obj(),
		"failed":               trimmedPod().Phase(corev1.PodFailed).Terminated(podspec.RemoverContainer, 2, string((&workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": 1}}).Encode())).Obj(),
		"oom in a running pod": trimmedPod().Running(trimmedAt).Terminated(podspec.ScannerContainer, 137, "").Obj(),
	}
	for name, p := range pods {
		t.Run(name, func(t *testing.T) {
			p.Spec.Containers = []corev1.Container{{Name: podspec.RemoverContainer, Image: "remover"}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			p.Annotations = map[string]string{"x": "y"}
			trimmed, err := cacheopts.TrimPod(p.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			to := wave.Timeouts{Start: 5 * time.Minute, Run: time.Hour}
			seen := wave.Sight{Created: trimmedAt.Add(-10 * time.Minute), Running: trimmedAt.Add(-2 * time.Hour)}
			want, got := wave.Classify(p, seen, trimmedAt, to, true), wave.Classify(trimmed.(*corev1.Pod), seen, trimmedAt, to, true)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(wave.Outcome{})); diff != "" {
				t.Errorf("outcome (-whole +trimmed):\n%s", diff)
			}
			if !wave.Deadline(p, seen, to).Equal(wave.Deadline(trimmed.(*corev1.Pod), seen, to)) {
				t.Error("deadlines differ")
			}
		})
	}
}

// TestSightedTrimmed: the cache's trimmed pods (cacheopts.TrimPod) keep
// what a restarted manager's sight is taken from.
func TestSightedTrimmed(t *testing.T) {
	for name, p := range map[string]*corev1.Pod{
		"pending": builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Obj(),
		"running": builder.MakePod("p", "a", trimmedAt.Add(-time.Hour)).Running(trimmedAt.Add(-time.Minute)).Obj(),
	} {
		p.UID = "u1"
		trimmed, err := cacheopts.TrimPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		sk := wave.Skew{D: time.Minute, OK: true}
		want, got := wave.Sighted(wave.Sight{}, p, time.Time{}, sk, trimmedAt), wave.Sighted(wave.Sight{}, trimmed.(*corev1.Pod), time.Time{}, sk, trimmedAt)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: sight (-whole +trimmed):\n%s", name, diff)
		}
	}
}
