package managertest

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// FakeKubelet plays the node agents of a manager under test, where no
// kubelet runs: it writes the status a kubelet writes when a worker pod's
// remover ends well, with the remover's summary as its termination message,
// which is what the manager reads of a node's run.
type FakeKubelet struct {
	Client client.Client
	// Namespace is the manager's, where its worker pods are.
	Namespace string
	// Removed is the count the remover reports on a node; nil reports 2
	// on every node.
	Removed func(node string) int
}

// Pods lists the worker pods.
func (k FakeKubelet) Pods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := k.Client.List(ctx, &pods, client.InNamespace(k.Namespace), client.HasLabels{podspec.LabelJob})
	return pods.Items, err
}

// Finish makes every pending worker pod that ok accepts (nil: every one)
// succeed, and returns the removed count it reported, by node, for the
// pods whose status it wrote. A pod changed or deleted meanwhile is left
// for the next round; another error ends the round.
func (k FakeKubelet) Finish(ctx context.Context, ok func(*corev1.Pod) bool) (map[string]int, error) {
	pods, err := k.Pods(ctx)
	if err != nil {
		return nil, err
	}
	return k.FinishPods(ctx, pods, ok)
}

// FinishPods is Finish for pods listed already.
func (k FakeKubelet) FinishPods(ctx context.Context, pods []corev1.Pod, ok func(*corev1.Pod) bool) (map[string]int, error) {
	written := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || (ok != nil && !ok(p)) {
			continue
		}
		removed := 2
		if k.Removed != nil {
			removed = k.Removed(p.Spec.NodeName)
		}
		sum := workerresult.Summary{Component: "remover", Node: p.Spec.NodeName, Counts: map[string]int{"removed": removed}, BytesFreed: 1000}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: string(sum.Encode())}}}}
		switch err := k.Client.Status().Update(ctx, p); {
		case err == nil:
			written[p.Spec.NodeName] = removed
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		default:
			return written, err
		}
	}
	return written, nil
}

// Refuse writes the status a kubelet writes for a pod it refuses at
// admission, a pod that does not fit the node (reason "OutOfcpu"): phase
// Failed with the reason, no container run.
func (k FakeKubelet) Refuse(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason = reason
	pod.Status.Message = "Pod was rejected: " + message
	return k.Client.Status().Update(ctx, pod)
}
