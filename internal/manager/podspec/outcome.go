package podspec

import (
	"strings"

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

// admissionReasons are the reasons a kubelet gives a pod it refuses to
// admit, beyond the "OutOf<resource>" ones: the node's devices, ports,
// labels, taints or OS do not fit the pod, as the kubelet checks them again
// for a pod bound by name, which no scheduler placed. A pod evicted while
// running also ends "Evicted", so that reason is left out.
var admissionReasons = map[string]bool{
	"UnexpectedAdmissionError":           true,
	"UnexpectedPredicateFailureType":     true,
	"NodeAffinity":                       true,
	"NodePorts":                          true,
	"TaintToleration":                    true,
	"PodOSNotSupported":                  true,
	"PodOSSelectorNodeLabelDoesNotMatch": true,
}

// NotAdmitted says whether the node's kubelet refused the pod at admission,
// and its words: a worker pod goes to its node by name, so on a packed node
// the kubelet, not a scheduler, finds it does not fit (OutOfcpu). The pod
// ran nothing, and it is recreated like a pod the API server refused
// (the ImageJob reconciler's creation backoff): the node may have room a
// moment later. The per-node report leaves it out for the same reason.
func NotAdmitted(pod *corev1.Pod) (string, bool) {
	r := pod.Status.Reason
	if pod.Status.Phase != corev1.PodFailed || (!strings.HasPrefix(r, "OutOf") && !admissionReasons[r]) {
		return "", false
	}
	if pod.Status.Message == "" {
		return r, true
	}
	return r + ": " + pod.Status.Message, true
}
