package reportwriter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// ours filters the pass's list in place: the job's own pods, in order,
// never a leftover of an earlier run of the job's name.
func TestOursKeepsTheJobsPodsInOrder(t *testing.T) {
	pod := func(name string, owner types.UID) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Name: "job", UID: owner, Controller: ptr.To(true)}}
		}
		return p
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want []string
	}{
		"none":            {},
		"all ours":        {pods: []corev1.Pod{pod("a", "run"), pod("b", "run")}, want: []string{"a", "b"}},
		"leftovers first": {pods: []corev1.Pod{pod("old", "earlier"), pod("a", "run"), pod("x", ""), pod("b", "run")}, want: []string{"a", "b"}},
		"leftovers last":  {pods: []corev1.Pod{pod("a", "run"), pod("old", "earlier")}, want: []string{"a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range ours(tc.pods, "run") {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods kept (-want +got):\n%s", diff)
			}
		})
	}
}
