package podspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNotAdmitted(t *testing.T) {
	type result struct {
		Message string
		Refused bool
	}
	failed := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	}
	with := func(p *corev1.Pod, reason, message string) *corev1.Pod {
		p.Status.Reason, p.Status.Message = reason, message
		return p
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want result
	}{
		"OutOfcpu": {pod: with(failed(), "OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: 1114, used: 3650, capacity: 4000"),
			want: result{"OutOfcpu: Pod was rejected: Node didn't have enough resource: cpu, requested: 1114, used: 3650, capacity: 4000", true}},
		"OutOfmemory":                     {pod: with(failed(), "OutOfmemory", "Pod was rejected"), want: result{"OutOfmemory: Pod was rejected", true}},
		"an extended resource":            {pod: with(failed(), "OutOfexample.com/gpu", ""), want: result{"OutOfexample.com/gpu", true}},
		"UnexpectedAdmissionError":        {pod: with(failed(), "UnexpectedAdmissionError", "Allocate failed"), want: result{"UnexpectedAdmissionError: Allocate failed", true}},
		"NodeAffinity":                    {pod: with(failed(), "NodeAffinity", "Predicate NodeAffinity failed"), want: result{"NodeAffinity: Predicate NodeAffinity failed", true}},
		"NodePorts":                       {pod: with(failed(), "NodePorts", ""), want: result{"NodePorts", true}},
		"TaintToleration":                 {pod: with(failed(), "TaintToleration", ""), want: result{"TaintToleration", true}},
		"evicted while running":           {pod: with(failed(), "Evicted", "The node was low on resource: ephemeral-storage.")},
		"a container failed":              {pod: failed()},
		"the node shut down":              {pod: with(failed(), "Terminated", "Pod was terminated in response to imminent node shutdown.")},
		"pending with an OutOf reason":    {pod: with(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "OutOfcpu", "")},
		"succeeded":                       {pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}},
		"a reason that only starts alike": {pod: with(failed(), "Out", "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg, ok := NotAdmitted(tc.pod)
			if diff := cmp.Diff(tc.want, result{msg, ok}); diff != "" {
				t.Errorf("NotAdmitted (-want +got):\n%s", diff)
			}
		})
	}
}
