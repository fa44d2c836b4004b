package pause

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOf(t *testing.T) {
	since := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	made := New("eraser-system", "incident 42", "alice")
	made.CreationTimestamp = metav1.NewTime(since)
	deleting := made.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: since.Add(time.Minute)}
	cases := map[string]struct {
		cm   *corev1.ConfigMap
		want State
	}{
		"no switch":        {cm: nil, want: State{}},
		"the switch":       {cm: made, want: State{Paused: true, Since: since, Reason: "incident 42", By: "alice"}},
		"the switch going": {cm: deleting, want: State{}},
		"bare, as declared in Git": {
			cm:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: "eraser-system", CreationTimestamp: metav1.NewTime(since)}},
			want: State{Paused: true, Since: since},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.cm)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	s := State{Paused: true, Since: time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC), Reason: "incident 42", By: "alice"}
	msg := s.Message("the run of generation 3")
	for _, want := range []string{"the run of generation 3", "paused since 2026-12-04T09:00:00Z", "by alice", "(incident 42)", "kubectl eraser resume", Name} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if got := (State{}).Message("x"); got != "" {
		t.Errorf("not paused, message %q", got)
	}
}
