package fault_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// TestPodLedger: the queue scenario's check of one worker per node flags
// the event at which a node holds two unfinished worker pods, and only
// then: a finished pod, a deleted one and a pod on another node do not
// count. It needs no control plane.
func TestPodLedger(t *testing.T) {
	pod := func(name, job, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), ResourceVersion: "1",
			Labels: map[string]string{podspec.LabelJob: job}}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	l := newPodLedger()
	steps := []struct {
		e          watch.Event
		violations int
	}{
		{watch.Event{Type: watch.Added, Object: pod("a1", "a", "n1", corev1.PodPending)}, 0},
		{watch.Event{Type: watch.Added, Object: pod("b2", "b", "n2", corev1.PodPending)}, 0},
		{watch.Event{Type: watch.Modified, Object: pod("a1", "a", "n1", corev1.PodSucceeded)}, 0},
		{watch.Event{Type: watch.Added, Object: pod("b1", "b", "n1", corev1.PodPending)}, 0},
		// A third run's pod on n1 while b's is unfinished.
		{watch.Event{Type: watch.Added, Object: pod("c1", "c", "n1", corev1.PodRunning)}, 1},
		{watch.Event{Type: watch.Deleted, Object: pod("c1", "c", "n1", corev1.PodRunning)}, 1},
		{watch.Event{Type: watch.Modified, Object: pod("b1", "b", "n1", corev1.PodFailed)}, 1},
		{watch.Event{Type: watch.Added, Object: pod("d1", "d", "n1", corev1.PodPending)}, 1},
	}
	for i, s := range steps {
		l.apply(s.e)
		if len(l.violations) != s.violations {
			t.Fatalf("after event %d (%s %s): violations %q, want %d", i+1, s.e.Type, s.e.Object.(*corev1.Pod).Name, l.violations, s.violations)
		}
	}
	if v := l.violations[0]; !strings.Contains(v, "node n1 holds 2") || !strings.Contains(v, "b1") || !strings.Contains(v, "c1") {
		t.Errorf("violation %q does not name the node and both pods", v)
	}
	if l.peak != 3 || l.peakRuns != 2 || l.events != len(steps) {
		t.Errorf("peak %d pods of %d runs over %d events, want 3 of 2 over %d", l.peak, l.peakRuns, l.events, len(steps))
	}
	if got := strings.Join(l.created["n1"], ","); got != "a,b,c,d" {
		t.Errorf("n1's pods appeared in the order %s, want a,b,c,d", got)
	}
}
