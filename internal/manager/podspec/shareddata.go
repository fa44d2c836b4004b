package podspec

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// sharedDataLimit bounds the hand-off directory in memory: the candidates'
// record (a few MiB for 10,000 images) and the FIFOs, which hold nothing.
var sharedDataLimit = resource.MustParse("64Mi")

// sharedData is the hand-off directory between the workers. On Linux it is
// in memory, so that a full disk, which most needs the removals, cannot
// refuse the hand-off before them; Windows has no memory-backed volumes.
func sharedData(os podpaths.OS) *corev1.EmptyDirVolumeSource {
	if os != podpaths.Linux {
		return &corev1.EmptyDirVolumeSource{}
	}
	return &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &sharedDataLimit}
}
