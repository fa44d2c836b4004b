package wave

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// State is where one node stands in a job.
type State int

const (
	StateActive State = iota // pod pending or running
	StateSucceeded
	StateFailed
)

// Outcome is the verdict on one node's pod.
type Outcome struct {
	State   State
	Reason  string
	Message string
	// TimedOut pods are deleted once their failure is recorded.
	TimedOut bool
	// Summary is the remover's report, when it left one.
	Summary *workerresult.Summary
	// Scanner is the scanner's report, when the pod had one and it left one.
	Scanner *workerresult.Summary
}

// counts are the node's figures for the job metrics; a dry run removed
// nothing.
func (o Outcome) counts() metrics.NodeCounts {
	var n metrics.NodeCounts
	if s := o.Summary; s != nil {
		if !s.DryRun {
			n.Removed = int64(s.Count(workerresult.Removed))
			n.Refused = int64(s.Count(workerresult.Refused))
			for _, p := range policyOrder {
				if t, ok := s.RemovedBy[string(p)]; ok && t.Bytes > 0 {
					if n.BytesFreed == nil {
						n.BytesFreed = map[string]int64{}
					}
					n.BytesFreed[string(p)] = int64(t.Bytes)
				}
			}
		}
		if f := s.Freed; f != nil && !s.DryRun {
			n.ExpectedFreed, n.Reclaimed = int64(f.ExpectedBytes), f.MeasuredBytes
		}
		if fs := s.ImageFs; fs != nil {
			n.ImageFs = &metrics.ImageFs{CapacityBytes: int64(fs.CapacityBytes), UsedBeforeBytes: int64(fs.UsedBeforeBytes), UsedAfterBytes: int64(fs.UsedAfterBytes)}
			if s.DryRun {
				// Whatever the worker estimated, a dry run left the
				// filesystem as it found it.
				n.ImageFs.UsedAfterBytes = n.ImageFs.UsedBeforeBytes
			}
		}
	}
	n.Regret = regretCounts(o.Summary)
	if o.Scanner != nil {
		n.Vulnerable = int64(o.Scanner.Counts[workerresult.CountToRemove])
	}
	return n
}

// Timeouts bound a pod's life.
type Timeouts struct {
	Start, Run time.Duration
	// Wait bounds a node's stalled wait for another run's worker (stall.go).
	Wait time.Duration
}

// Classify judges a node's pod at time now, its timeouts counted from what
// this process saw of it (sight.go). nodeExists is false when the node has
// been deleted.
func Classify(pod *corev1.Pod, seen Seen, now time.Time, t Timeouts, nodeExists bool) Outcome {
	summary, scanner := workerSummary(pod, podspec.RemoverContainer), workerSummary(pod, podspec.ScannerContainer)
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return Outcome{State: StateSucceeded, Summary: summary, Scanner: scanner}
	case corev1.PodFailed:
		return Outcome{State: StateFailed, Reason: failureReason(pod), Message: failureMessage(pod), Summary: summary, Scanner: scanner}
	}
	// Still pending or running. A container that already failed decides it:
	// its siblings may never finish on their own.
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.ExitCode != 0 {
			return Outcome{State: StateFailed, Reason: failureReason(pod), Message: failureMessage(pod), Summary: summary, Scanner: scanner}
		}
	}
	if !nodeExists {
		return Outcome{State: StateFailed, Reason: eraserv1.ReasonNodeDeleted, Message: "the node was deleted during the run"}
	}
	if pod.DeletionTimestamp != nil {
		return Outcome{State: StateFailed, Reason: eraserv1.ReasonPodDeleted, Message: "the pod was deleted before it finished"}
	}
	// A time not seen yet is not a timeout: the pod is judged again once it is.
	if pod.Status.Phase != corev1.PodRunning {
		if !seen.Created.IsZero() && t.Start > 0 && now.Sub(seen.Created) >= t.Start {
			return Outcome{State: StateFailed, Reason: eraserv1.ReasonStartTimeout, TimedOut: true,
				Message: fmt.Sprintf("did not start within %v%s", t.Start, waiting(pod))}
		}
	} else if !seen.Running.IsZero() && t.Run > 0 && now.Sub(seen.Running) >= t.Run {
		return Outcome{State: StateFailed, Reason: eraserv1.ReasonRunTimeout, TimedOut: true,
			Message: fmt.Sprintf("did not finish within %v", t.Run)}
	}
	return Outcome{State: StateActive}
}

// timestampGrain is the resolution of a pod's creationTimestamp: a pod
// created at 12:00:00.9 says 12:00:00, and would time out up to a second
// early without it.
const timestampGrain = time.Second

// Deadline is when an active pod would time out, zero when it cannot yet.
func Deadline(pod *corev1.Pod, seen Seen, t Timeouts) time.Time {
	if pod.Status.Phase == corev1.PodRunning {
		if t.Run == 0 || seen.Running.IsZero() {
			return time.Time{}
		}
		return seen.Running.Add(t.Run)
	}
	if t.Start == 0 || seen.Created.IsZero() {
		return time.Time{}
	}
	return seen.Created.Add(t.Start)
}

func waiting(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return fmt.Sprintf(" (%s: %s)", cs.Name, w.Reason)
		}
	}
	if pod.Status.Reason != "" {
		return " (" + pod.Status.Reason + ")"
	}
	return ""
}

// failureReason is podspec's, which the per-node report shares.
func failureReason(pod *corev1.Pod) string { return podspec.FailureReason(pod) }

// failureMessage names the failed container and, when it left a summary
// with an error (a worker that could not run), that error.
func failureMessage(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		term := cs.State.Terminated
		if term == nil || term.ExitCode == 0 {
			continue
		}
		if s, err := workerresult.Decode([]byte(term.Message)); err == nil && s.Error != "" {
			return fmt.Sprintf("container %s: %s", cs.Name, s.Error)
		}
		return fmt.Sprintf("container %s: %s (exit code %d)", cs.Name, term.Reason, term.ExitCode)
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		return pod.Status.Reason + ": " + pod.Status.Message
	}
	return "pod failed"
}

// workerSummary reads a worker container's termination message.
func workerSummary(pod *corev1.Pod, container string) *workerresult.Summary {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container || cs.State.Terminated == nil || cs.State.Terminated.Message == "" {
			continue
		}
		if s, err := workerresult.Decode([]byte(cs.State.Terminated.Message)); err == nil {
			return &s
		}
	}
	return nil
}

// AddResults adds a remover's counts to the job's totals.
func AddResults(total *eraserv1.ImageResults, s *workerresult.Summary) {
	if s == nil {
		return
	}
	total.Removed += int64(s.Count(workerresult.Removed))
	total.InUse += int64(s.Count(workerresult.InUse))
	total.Pinned += int64(s.Count(workerresult.Pinned))
	total.Excluded += int64(s.Count(workerresult.Excluded))
	total.NotOnNode += int64(s.Count(workerresult.NotOnNode))
	total.Failed += int64(s.Count(workerresult.Failed) + s.Count(workerresult.Invalid))
	total.Refused += int64(s.Count(workerresult.Refused))
	total.BytesFreed += int64(s.BytesFreed)
	if f := s.Freed; f != nil {
		total.ExpectedBytesFreed += int64(f.ExpectedBytes)
		total.MeasuredBytesFreed += f.MeasuredBytes
		if f.Note != "" {
			total.FreedMismatches++
		}
	}
	total.TooYoung += int64(s.Count(workerresult.TooYoung))
	total.RecentlyUsed += int64(s.Count(workerresult.RecentlyUsed))
	total.NotNeeded += int64(s.Count(workerresult.NotNeeded))
	total.CoolingDown += int64(s.Count(workerresult.CoolingDown))
	total.GoneFromRegistry += int64(s.Count(workerresult.GoneFromRegistry))
	total.RegistryUnreachable += int64(s.Count(workerresult.RegistryUnreachable))
	total.Referenced += int64(s.Count(workerresult.Referenced))
	total.NotRepullable += int64(s.Count(workerresult.NotRepullable))
	total.DryRun = total.DryRun || s.DryRun
	addRegret(total, s)
	for i, p := range policyOrder {
		t, ok := s.RemovedBy[string(p)]
		if !ok || (t.Images == 0 && t.Bytes == 0) {
			continue
		}
		j := slices.IndexFunc(total.Policies, func(r eraserv1.PolicyResult) bool { return r.Policy == p })
		if j < 0 {
			// Inserted in place, so that the list stays in policyOrder
			// however the nodes' policies interleave.
			j = len(total.Policies)
			for k, r := range total.Policies {
				if slices.Index(policyOrder, r.Policy) > i {
					j = k
					break
				}
			}
			total.Policies = slices.Insert(total.Policies, j, eraserv1.PolicyResult{Policy: p})
		}
		total.Policies[j].Removed += int64(t.Images)
		total.Policies[j].BytesFreed += int64(t.Bytes)
	}
}

// policyOrder is the order of docs/retention.md's table, in which an image
// chosen by several policies counts under the first; the status lists the
// policies in it. A key outside it (a newer worker's) is left out: the CRD
// would refuse it.
var policyOrder = []eraserv1.RemovalPolicy{
	eraserv1.PolicyListed, eraserv1.PolicyUnused, eraserv1.PolicyVulnerable, eraserv1.PolicyUnusedFor, eraserv1.PolicySuperseded, eraserv1.PolicyDiskPressure,
}

// MaxMessage bounds a message the job's status or an Event quotes: a
// node's failure, a condition's, what the API server refused.
const MaxMessage = 1000
