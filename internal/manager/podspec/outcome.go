package podspec

import corev1 "k8s.io/api/core/v1"

// Reasons a worker pod failed, as the job's status.failedNodes and the
// per-node report both name them: one classification, so that the two never
// tell a node's failure differently.
const (
	// ReasonPodFailed: a container failed, or the pod did, otherwise.
	ReasonPodFailed = "PodFailed"
	// ReasonRemovalsFailed: the remover ran, but removals it was asked for
	// failed (the runtime erred or restarted).
	ReasonRemovalsFailed = "RemovalsFailed"
)

// ExitRemovalsFailed is the remover's exit code for a run that completed
// with failed removals (worker.ExitNodeFailed; a test keeps them equal).
const ExitRemovalsFailed = 2

// FailureReason tells failed removals from a pod that failed otherwise. It
// is only asked of a pod already judged failed.
func FailureReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; cs.Name == RemoverContainer && term != nil && term.ExitCode == ExitRemovalsFailed {
			return ReasonRemovalsFailed
		}
	}
	return ReasonPodFailed
}
