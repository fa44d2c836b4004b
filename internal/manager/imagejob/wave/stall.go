// Every wait has a bound: a node waits for another run's worker on it (the
// queue), and that worker ends on its own timeouts, except where the node
// itself cannot end it. A node that is not Ready runs no pod and removes
// none: the worker on it stays, terminating if its run deleted it, until
// the node comes back or its object goes. Such a wait is given up
// manager.imageJob.nodeWaitTimeout after it stalled.

package wave

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/util/textcut"
)

// Stall is since when a node's wait cannot end, and why.
type Stall struct {
	Since time.Time
	Why   string
}

// StallFunc answers, for a node, whether its wait has stalled.
type StallFunc func(node string) (Stall, bool)

// Stalled says since when a wait on this node cannot end: the node not
// Ready (since its condition last changed; since notReadySeen when the
// condition carries no time), or another run's worker on it terminating
// past its deletion (ours tells this run's pods). The earlier of the two
// counts.
func Stalled(node *corev1.Node, busy []*corev1.Pod, ours func(*corev1.Pod) bool, notReadySeen time.Time) (Stall, bool) {
	var out Stall
	found := false
	take := func(since time.Time, why string) {
		if !found || since.Before(out.Since) {
			out, found = Stall{Since: since, Why: why}, true
		}
	}
	if node != nil && !NodeReady(node) {
		since := notReadySeen
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
				since = c.LastTransitionTime.Time
			}
		}
		take(since, fmt.Sprintf("the node has not been Ready since %s", since.UTC().Format(time.RFC3339)))
	}
	for _, pod := range busy {
		if pod.DeletionTimestamp == nil || ours(pod) {
			continue
		}
		since := pod.DeletionTimestamp.Time
		take(since, fmt.Sprintf("worker pod %s has been terminating since %s", pod.Name, since.UTC().Format(time.RFC3339)))
	}
	return out, found
}

// NodeReady is whether the node's Ready condition is True. A node without
// one (just registered) is taken as Ready: a wait on it is no stall.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// gaveUp is the failure of a node whose stalled wait ran out, or false
// while it may still wait (with when it runs out).
func gaveUp(holder string, s Stall, bound time.Duration, now time.Time) (failure string, due time.Time, out bool) {
	due = s.Since.Add(bound)
	if now.Before(due) {
		return "", due, false
	}
	return textcut.Cut(fmt.Sprintf("gave up waiting for %s's worker on the node after nodeWaitTimeout %v: %s; no worker of this run was created on it",
		holder, bound, s.Why), MaxMessage), due, true
}
