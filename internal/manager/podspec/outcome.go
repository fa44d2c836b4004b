package podspec

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

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

// FailureReason tells failed removals from a pod that failed otherwise. It
// is only asked of a pod already judged failed.
func FailureReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; cs.Name == RemoverContainer && term != nil && term.ExitCode == workerresult.ExitNodeFailed {
			return ReasonRemovalsFailed
		}
	}
	return ReasonPodFailed
}
