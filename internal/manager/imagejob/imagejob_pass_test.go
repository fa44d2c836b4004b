package imagejob

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
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
