package reportwriter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// TestNodeOfReason: the report names a node's failure as the job's
// status.failedNodes does (podspec.FailureReason): a remover that exited 2
// ran and failed removals, which is RemovalsFailed, not PodFailed.
func TestNodeOfReason(t *testing.T) {
	exited := func(name string, code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	type verdict struct {
		Failed bool
		Reason string
	}
	cases := map[string]struct {
		phase    corev1.PodPhase
		statuses []corev1.ContainerStatus
		want     verdict
	}{
		"succeeded": {phase: corev1.PodSucceeded, statuses: []corev1.ContainerStatus{exited(podspec.CollectorContainer, 0), exited(podspec.RemoverContainer, 0)}},
		"remover exited 2": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.CollectorContainer, 0), exited(podspec.RemoverContainer, 2)},
			want: verdict{true, eraserv1.ReasonRemovalsFailed}},
		"manual remover exited 2": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.RemoverContainer, 2)},
			want: verdict{true, eraserv1.ReasonRemovalsFailed}},
		"remover exited 1": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.RemoverContainer, 1)},
			want: verdict{true, eraserv1.ReasonPodFailed}},
		"collector exited 2": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.CollectorContainer, 2), exited(podspec.RemoverContainer, 0)},
			want: verdict{true, eraserv1.ReasonPodFailed}},
		// As the job's status: the remover's exit 2 decides, whichever
		// container is listed first.
		"collector 1, remover 2": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.CollectorContainer, 1), exited(podspec.RemoverContainer, 2)},
			want: verdict{true, eraserv1.ReasonRemovalsFailed}},
		"scanner 1, remover 2": {phase: corev1.PodFailed, statuses: []corev1.ContainerStatus{exited(podspec.ScannerContainer, 1), exited(podspec.RemoverContainer, 2)},
			want: verdict{true, eraserv1.ReasonRemovalsFailed}},
		"evicted, no container ended": {phase: corev1.PodFailed, want: verdict{true, eraserv1.ReasonPodFailed}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: tc.phase, ContainerStatuses: tc.statuses}}
			n := NodeOf(pod)
			if diff := cmp.Diff(tc.want, verdict{n.Failed, n.Reason}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n.Failed && n.Reason != podspec.FailureReason(pod) {
				t.Errorf("report says %s, the job's status %s", n.Reason, podspec.FailureReason(pod))
			}
		})
	}
}

// TestTodo: a pod its node's kubelet refused at admission ran nothing and
// is replaced: the node is reported from its next pod, or its failure on
// record, never from the refused one.
func TestTodo(t *testing.T) {
	pod := func(node string, phase corev1.PodPhase, reason string) corev1.Pod {
		return corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want []string
	}{
		"finished, running and written": {pods: []corev1.Pod{pod("a", corev1.PodSucceeded, ""), pod("b", corev1.PodRunning, ""), pod("w", corev1.PodFailed, "")},
			want: []string{"a"}},
		"a failed pod":         {pods: []corev1.Pod{pod("a", corev1.PodFailed, "")}, want: []string{"a"}},
		"refused at admission": {pods: []corev1.Pod{pod("a", corev1.PodFailed, "OutOfcpu"), pod("b", corev1.PodFailed, "UnexpectedAdmissionError")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range Todo(tc.pods, map[string]bool{"w": true}, map[string]bool{}) {
				got = append(got, p.Spec.NodeName)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("todo (-want +got):\n%s", diff)
			}
		})
	}
}
