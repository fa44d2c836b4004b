package nodereport

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// TestBytes: a shard says its size in its metadata; one written without
// it counts as a full shard.
func TestBytes(t *testing.T) {
	job := &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{Name: "job", UID: "u"}}
	written := ConfigMap(job, "ns", 0, Shard{Nodes: []string{"a", "b"}, Data: make([]byte, 1000)})
	cases := map[string]struct {
		meta metav1.Object
		want int64
	}{
		"as written":       {meta: written, want: int64(1000 + len("a\nb\n") + len("job"))},
		"without it":       {meta: &metav1.ObjectMeta{}, want: ShardBudget},
		"not a number":     {meta: &metav1.ObjectMeta{Annotations: map[string]string{AnnotationBytes: "big"}}, want: ShardBudget},
		"a negative count": {meta: &metav1.ObjectMeta{Annotations: map[string]string{AnnotationBytes: "-1"}}, want: ShardBudget},
		"zero":             {meta: &metav1.ObjectMeta{Annotations: map[string]string{AnnotationBytes: strconv.Itoa(0)}}, want: 0},
	}
	got, want := map[string]int64{}, map[string]int64{}
	for name, tc := range cases {
		got[name], want[name] = Bytes(tc.meta), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Bytes (-want +got):\n%s", diff)
	}
}
