package wave

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// TestFirstSeen: every time a timeout counts from is on the manager's clock,
// whatever the pod's own timestamps (the API server's, the kubelet's) say.
func TestFirstSeen(t *testing.T) {
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
		prev      Seen
		pod       *corev1.Pod
		createdAt time.Time
		Skew      Skew
		want      Seen
	}{
		"created by this process: from its creation": {
			pod: withUID(apiPod(), "1"), createdAt: t0.Add(-time.Minute),
			want: Seen{UID: "u1", Created: t0.Add(-time.Minute)},
		},
		"after a restart, skew unknown: from first sight": {
			pod:  withUID(apiPod(), "1"),
			want: Seen{UID: "u1", Created: t0},
		},
		"after a restart, skew measured (ahead): the API server's time shifted": {
			pod: withUID(apiPod(), "1"), Skew: Skew{D: ahead, OK: true},
			want: Seen{UID: "u1", Created: t0.Add(-2*time.Minute + timestampGrain)},
		},
		"after a restart, skew measured (behind): the API server's time shifted": {
			pod: withUID(builder.MakePod("p", "a", t0.Add(ahead-2*time.Minute)), "1"), Skew: Skew{D: -ahead, OK: true},
			want: Seen{UID: "u1", Created: t0.Add(-2*time.Minute + timestampGrain)},
		},
		"a skew that puts the creation ahead of now: first sight": {
			pod: withUID(apiPod(), "1"), Skew: Skew{D: ahead + 5*time.Minute, OK: true},
			want: Seen{UID: "u1", Created: t0},
		},
		"seen before: kept": {
			prev: Seen{UID: "u1", Created: t0.Add(-time.Minute)},
			pod:  withUID(apiPod(), "1"), createdAt: t0, Skew: Skew{D: ahead, OK: true},
			want: Seen{UID: "u1", Created: t0.Add(-time.Minute)},
		},
		"first seen running: from now, not the kubelet's start time": {
			prev: Seen{UID: "u1", Created: t0.Add(-time.Minute)},
			pod:  withUID(apiPod().Running(t0.Add(-ahead-time.Hour)), "1"),
			want: Seen{UID: "u1", Created: t0.Add(-time.Minute), Running: t0},
		},
		"running at first sight": {
			pod:  withUID(apiPod().Running(t0.Add(-ahead-time.Minute)), "1"),
			want: Seen{UID: "u1", Created: t0, Running: t0},
		},
		"seen running before: kept": {
			prev: Seen{UID: "u1", Created: t0.Add(-time.Hour), Running: t0.Add(-30 * time.Minute)},
			pod:  withUID(apiPod().Running(t0), "1"),
			want: Seen{UID: "u1", Created: t0.Add(-time.Hour), Running: t0.Add(-30 * time.Minute)},
		},
		"another pod of the same name: seen afresh": {
			prev: Seen{UID: "u1", Created: t0.Add(-time.Hour), Running: t0.Add(-30 * time.Minute)},
			pod:  withUID(apiPod(), "2"),
			want: Seen{UID: "u2", Created: t0},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := FirstSeen(c.prev, c.pod, c.createdAt, c.Skew, t0)
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(Seen{})); diff != "" {
				t.Errorf("sight (-want +got):\n%s", diff)
			}
		})
	}
}
