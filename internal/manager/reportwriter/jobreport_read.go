// The read phase: finished pods' workers are read, from their logs and
// termination messages, into report nodes.

package reportwriter

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Todo lists the pods that finished and are not in the report yet, by
// node name. A pod the node's kubelet refused at admission ran nothing and
// is replaced by another: its node is reported from the next pod, or from
// its failure on record.
func Todo(pods []corev1.Pod, written, pending map[string]bool) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if _, refused := podspec.NotAdmitted(p); refused || !podspec.Finished(p) {
			continue
		}
		if n := p.Spec.NodeName; !written[n] && !pending[n] {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Spec.NodeName, b.Spec.NodeName) })
	return out
}

// node is one finished pod's part of the report: the counts from the
// termination messages, the entries from the logs.
func (r *Reconciler) node(ctx context.Context, pod *corev1.Pod, intern *interner) nodereport.Node {
	n := NodeOf(pod)
	var problems []string
	// The manager's cache keeps container statuses, not the spec.
	for _, c := range pod.Status.ContainerStatuses {
		if !worker(c.Name) {
			continue
		}
		entries, more, err := r.read(ctx, pod, c.Name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", c.Name, err))
		}
		for _, e := range entries {
			e.Image, e.ID = intern.get(e.Image), intern.get(e.ID)
			n.Entries = append(n.Entries, e)
		}
		n.Omitted += more
	}
	if len(problems) > 0 {
		n.Unavailable = textcut.Cut("reading the log: "+strings.Join(problems, "; "), maxMessage)
		log.FromContext(ctx).V(1).Info("report: a node's log could not be read", "node", n.Name, "error", n.Unavailable)
	}
	return n
}

// read reads one container's result lines. The log has r.openTimeout to
// start (a kubelet that cannot be reached fails there) and readTimeout in
// all.
func (r *Reconciler) read(ctx context.Context, pod *corev1.Pod, container string) ([]nodereport.Entry, int, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	open := time.AfterFunc(r.openTimeout, cancel)
	rc, err := r.logs.Log(ctx, pod.Namespace, pod.Name, container, logLimit)
	if !open.Stop() {
		if err == nil {
			rc.Close()
		}
		return nil, 0, fmt.Errorf("the log did not start within %s", r.openTimeout)
	}
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	return nodereport.ParseLog(rc, maxEntries)
}

// worker says whether a container is one of the node workers, whose logs
// and termination messages the report reads.
func worker(container string) bool {
	switch container {
	case podspec.CollectorContainer, podspec.ScannerContainer, podspec.RemoverContainer:
		return true
	}
	return false
}

// NodeOf is a finished pod's node with the totals its workers left in
// their termination messages, and its failure if it failed.
func NodeOf(pod *corev1.Pod) nodereport.Node {
	n := nodereport.Node{Name: pod.Spec.NodeName}
	for _, cs := range pod.Status.ContainerStatuses {
		term := cs.State.Terminated
		if term == nil {
			continue
		}
		if term.ExitCode != 0 && !n.Failed {
			n.Failed, n.Reason = true, podspec.FailureReason(pod)
			n.Message = fmt.Sprintf("container %s exited with code %d", cs.Name, term.ExitCode)
		}
		if term.Message == "" || !worker(cs.Name) {
			continue
		}
		s, err := workerresult.Decode([]byte(term.Message))
		if err != nil {
			continue
		}
		if s.Error != "" && term.ExitCode != 0 {
			n.Message += ": " + textcut.Cut(s.Error, maxMessage)
		}
		scanner := cs.Name == podspec.ScannerContainer
		for k, v := range s.Counts {
			if k == "candidates" || scanner && k == workerresult.CountToRemove {
				continue
			}
			if scanner {
				// Its verdicts, as its result lines name them.
				k = workerresult.ScanOutcome(k)
			}
			if n.Counts == nil {
				n.Counts = map[string]int{}
			}
			n.Counts[k] += v
		}
		if scanner {
			n.ScanDB = s.ScanDB
		}
		if cs.Name == podspec.RemoverContainer {
			n.BytesFreed, n.DryRun, n.Freed, n.ImageFs = s.BytesFreed, s.DryRun, s.Freed, s.ImageFs
			n.Regret = s.Regret
			n.RegistryChecks = s.RegistryChecks
		}
	}
	if pod.Status.Phase == corev1.PodFailed && !n.Failed {
		n.Failed, n.Reason, n.Message = true, podspec.FailureReason(pod), textcut.Cut(strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message), maxMessage)
	}
	return n
}
