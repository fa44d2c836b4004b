package podspec

import (
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// FailureReason tells failed removals from a pod that failed otherwise. It
// is only asked of a pod already judged failed.
func FailureReason(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; cs.Name == RemoverContainer && term != nil && term.ExitCode == workerresult.ExitNodeFailed {
			return eraserv1.ReasonRemovalsFailed
		}
	}
	return eraserv1.ReasonPodFailed
}
