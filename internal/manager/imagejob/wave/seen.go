// One clock for the timeouts. A pod's creationTimestamp is the API server's
// clock and its start time the kubelet's; comparing either with the
// manager's clock makes a manager that runs ahead by more than
// podStartTimeout fail every node at once, and one that runs behind wait for
// ever. So every timeout is measured on the manager's own clock, from when
// this process created the pod or first saw it (and first saw it running).
//
// A restarted manager (or a new leader) did not see the pods start. It
// counts from its first sight, which never fails a node early and bounds
// the wait at one more timeout. When it has measured the skew to the API
// server (from the creationTimestamp of a pod it created itself), it counts
// a pod's start from the pod's creationTimestamp shifted by that skew, or
// from its first sight if that is sooner, and so loses none of the time the
// pod already waited. The API server's Date header would measure the same
// skew without a pod created, but only through a transport shared by every
// client of the manager; the pods this package creates give it for free.
// The kubelet's clock is a third one no measurement here covers, so a run
// always counts from the pod's first sight running. Times this process
// reads from its clock keep Go's monotonic reading, so that a step of the
// wall clock (NTP) mid-run moves no deadline either.
//
// The job-level times (status.startTime, completionTime, deleteAfter, the
// report's deleteAfter) and the creation backoff are the manager's own
// writes compared with the manager's clock: consistent as they are. A new
// leader on another machine brings that machine's clock to them, which
// shifts a cleanup by the difference between the replicas' clocks and
// fails no node.

package wave

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Seen is when this process saw a pod begin each of its timeouts, on its
// own clock.
type Seen struct {
	UID types.UID
	// Created starts the start timeout, running the run timeout.
	Created, Running time.Time
}

// Skew is the manager's clock minus the API server's, as last measured.
type Skew struct {
	D  time.Duration
	OK bool
}

// FirstSeen updates the times a pod was first seen, at time now (manager's clock). createdAt is
// when this process's creation of the pod returned, zero when it did not
// create it.
func FirstSeen(prev Seen, pod *corev1.Pod, createdAt time.Time, sk Skew, now time.Time) Seen {
	s := prev
	if s.UID != pod.UID {
		// Another pod of the same name: nothing seen of the old one counts.
		s = Seen{UID: pod.UID}
	}
	if s.Created.IsZero() {
		switch {
		case !createdAt.IsZero():
			s.Created = createdAt
		case sk.OK:
			// The measured skew includes the request's latency and the
			// sample's truncation to whole seconds, both of which make the
			// pod look younger; the grain covers this pod's own truncation.
			s.Created = pod.CreationTimestamp.Add(sk.D + timestampGrain)
			if s.Created.After(now) {
				s.Created = now
			}
		default:
			s.Created = now
		}
	}
	if s.Running.IsZero() && pod.Status.Phase == corev1.PodRunning {
		s.Running = now
	}
	return s
}
