package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// TestSighted: every time a timeout counts from is on the manager's clock,
// whatever the pod's own timestamps (the API server's, the kubelet's) say.
func TestSighted(t *testing.T) {
	ahead := 10 * time.Minute
	// Created two minutes ago by the API server's clock, which is ten
	// minutes behind the manager's (now is t0 on the manager's clock).
	apiPod := func() *builder.PodWrapper { return builder.MakePod("p", "a", t0.Add(-ahead-2*time.Minute)) }
	withUID := func(p *builder.PodWrapper, uid string) *corev1.Pod {
		o := p.Obj()
		o.UID = types.UID("u" + uid)
		return o
	}
	cases := map[string]struct {
		prev      sight
		pod       *corev1.Pod
		createdAt time.Time
		skew      skew
		want      sight
	}{
		"created by this process: from its creation": {
			pod: withUID(apiPod(), "1"), createdAt: t0.Add(-time.Minute),
			want: sight{uid: "u1", created: t0.Add(-time.Minute)},
		},
		"after a restart, skew unknown: from first sight": {
			pod:  withUID(apiPod(), "1"),
			want: sight{uid: "u1", created: t0},
		},
		"after a restart, skew measured (ahead): the API server's time shifted": {
			pod: withUID(apiPod(), "1"), skew: skew{d: ahead, ok: true},
			want: sight{uid: "u1", created: t0.Add(-2*time.Minute + timestampGrain)},
		},
		"after a restart, skew measured (behind): the API server's time shifted": {
			pod: withUID(builder.MakePod("p", "a", t0.Add(ahead-2*time.Minute)), "1"), skew: skew{d: -ahead, ok: true},
			want: sight{uid: "u1", created: t0.Add(-2*time.Minute + timestampGrain)},
		},
		"a skew that puts the creation ahead of now: first sight": {
			pod: withUID(apiPod(), "1"), skew: skew{d: ahead + 5*time.Minute, ok: true},
			want: sight{uid: "u1", created: t0},
		},
		"seen before: kept": {
			prev: sight{uid: "u1", created: t0.Add(-time.Minute)},
			pod:  withUID(apiPod(), "1"), createdAt: t0, skew: skew{d: ahead, ok: true},
			want: sight{uid: "u1", created: t0.Add(-time.Minute)},
		},
		"first seen running: from now, not the kubelet's start time": {
			prev: sight{uid: "u1", created: t0.Add(-time.Minute)},
			pod:  withUID(apiPod().Running(t0.Add(-ahead-time.Hour)), "1"),
			want: sight{uid: "u1", created: t0.Add(-time.Minute), running: t0},
		},
		"running at first sight": {
			pod:  withUID(apiPod().Running(t0.Add(-ahead-time.Minute)), "1"),
			want: sight{uid: "u1", created: t0, running: t0},
		},
		"seen running before: kept": {
			prev: sight{uid: "u1", created: t0.Add(-time.Hour), running: t0.Add(-30 * time.Minute)},
			pod:  withUID(apiPod().Running(t0), "1"),
			want: sight{uid: "u1", created: t0.Add(-time.Hour), running: t0.Add(-30 * time.Minute)},
		},
		"another pod of the same name: seen afresh": {
			prev: sight{uid: "u1", created: t0.Add(-time.Hour), running: t0.Add(-30 * time.Minute)},
			pod:  withUID(apiPod(), "2"),
			want: sight{uid: "u2", created: t0},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := sighted(c.prev, c.pod, c.createdAt, c.skew, t0)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(sight{})); diff != "" {
				t.Errorf("sight (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSightedTrimmed: the cache's trimmed pods (cacheopts.TrimPod) keep
// what a restarted manager's sight is taken from.
func TestSightedTrimmed(t *testing.T) {
	for name, p := range map[string]*corev1.Pod{
		"pending": builder.MakePod("p", "a", t0.Add(-time.Hour)).Obj(),
		"running": builder.MakePod("p", "a", t0.Add(-time.Hour)).Running(t0.Add(-time.Minute)).Obj(),
	} {
		p.UID = "u1"
		trimmed, err := cacheopts.TrimPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		sk := skew{d: time.Minute, ok: true}
		want, got := sighted(sight{}, p, time.Time{}, sk, t0), sighted(sight{}, trimmed.(*corev1.Pod), time.Time{}, sk, t0)
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(sight{})); diff != "" {
			t.Errorf("%s: sight (-whole +trimmed):\n%s", name, diff)
		}
	}
}

// TestSkewedManagerClock: the manager's clock 10 minutes ahead of the API
// server's and the kubelet's (which the test's wall clock plays), then 10
// minutes behind. No node times out early, a pod stuck pending and one
// stuck running still time out, and a restart in between only delays them.
func TestSkewedManagerClock(t *testing.T) {
	for name, offset := range map[string]time.Duration{"ahead": 10 * time.Minute, "behind": -10 * time.Minute} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.clock.SetTime(time.Now().Add(offset))
			begin := f.clock.Now()
			node := func(s string) string { return "skew-" + name + "-" + s }
			f.nodes(builder.MakeNode(node("ok")).Obj(), builder.MakeNode(node("pending")).Obj(), builder.MakeNode(node("running")).Obj())
			f.job(name, podspec.KindManual, baseConfig+"manager: {imageJob: {podStartTimeout: 2m, podRunTimeout: 5m}}", "*")
			f.reconcile(name)
			f.reconcile(name)
			// The kubelet's timestamps are its own clock's: the API server's.
			started := metav1.Now()
			for _, p := range f.pods(name) {
				if p.Spec.NodeName == node("pending") {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
				} else {
					p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &started
				}
				if err := env.Client.Status().Update(f.ctx, &p); err != nil {
					t.Fatal(err)
				}
			}
			failed := func(want map[string]string) {
				t.Helper()
				f.reconcile(name)
				got := map[string]string{}
				for _, nf := range f.get(name).Status.FailedNodes {
					got[nf.Node] = nf.Reason
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("failed nodes %v into the job (-want +got):\n%s", f.clock.Now().Sub(begin).Round(time.Second), diff)
				}
			}
			failed(map[string]string{})
			f.clock.Step(time.Minute)
			failed(map[string]string{})
			// A new leader counts from its first sight of each pod.
			f.r = f.newReconciler()
			failed(map[string]string{})
			f.clock.Step(90 * time.Second)
			failed(map[string]string{})
			for _, p := range f.pods(name) {
				if p.Spec.NodeName == node("ok") {
					f.finishPod(&p, corev1.PodSucceeded, removed(1, 1))
				}
			}
			f.clock.Step(40 * time.Second)
			failed(map[string]string{node("pending"): ReasonStartTimeout})
			f.clock.Step(3 * time.Minute)
			failed(map[string]string{node("pending"): ReasonStartTimeout, node("running"): ReasonRunTimeout})
			if job := f.get(name); job.Status.Phase != eraserv1.PhaseFailed || job.Status.Succeeded != 1 {
				t.Errorf("job %+v, want Failed with one node succeeded", job.Status)
			}
		})
	}
}
