package podspec

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// pullSecrets are the worker pod's image pull secrets: manager.pullSecrets,
// then the manager's ERASER_PULL_SECRET_NAMES, as upstream appended them.
// A name given twice is listed once; the kubelet would try it twice.
func pullSecrets(configured, fromEnv []string) []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, name := range append(slices.Clone(configured), fromEnv...) {
		ref := corev1.LocalObjectReference{Name: name}
		if !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}
