package podspec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// TestSharedDataInMemory: a scheduled pod's hand-off directory is in memory
// on Linux, so that a full disk cannot refuse the hand-off before the
// removals that free it; on Windows, which has no memory-backed volumes,
// it is on disk.
func TestSharedDataInMemory(t *testing.T) {
	const doc = "components: {collector: {enabled: true}, scanner: {enabled: true}}"
	got := map[podpaths.OS]corev1.StorageMedium{}
	for _, os := range []podpaths.OS{podpaths.Linux, podpaths.Windows} {
		pod, err := Build(Params{References: testRefs, Job: "j", Kind: KindCollector, Node: "n", OS: os, ConfigMap: "j", LogLevel: "info", Config: cfg(t, doc)})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name == volShared {
				got[os] = v.EmptyDir.Medium
				if os == podpaths.Linux && (v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.IsZero()) {
					t.Error("the in-memory hand-off directory has no size limit")
				}
			}
		}
	}
	want := map[podpaths.OS]corev1.StorageMedium{podpaths.Linux: corev1.StorageMediumMemory, podpaths.Windows: corev1.StorageMediumDefault}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shared-data medium (-want +got):\n%s", diff)
	}
}
