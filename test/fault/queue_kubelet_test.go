package fault_test

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// queueKubelet plays the nodes' kubelets from the pod watch: a worker pod
// runs as soon as it is seen and succeeds a short, varied while later
// (0.2 to 0.8 s), with a remover summary whose count is its own run's and
// node's. The scheduled run's pods do not finish while holdScheduled is set.
type queueKubelet struct {
	s             *scenario
	ledger        *podLedger
	holdScheduled atomic.Bool
	mu            sync.Mutex
	// written are the removed counts reported, by job UID, then node.
	written map[types.UID]map[string]int
}

func (k *queueKubelet) run(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				k.round(ctx)
			}
		}
	}()
	return done
}

func hashOf(parts ...string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.Join(parts, "/")))
	return h.Sum32()
}

// removedBy is what a run's pod on a node reports removed: different per
// run and node, so that a pod counted in the wrong run shows in the sums.
func removedBy(job, node string) int { return 1 + int(hashOf(job, node)%7) }

// round acts once on every unfinished pod the watch shows; a failed update
// (a conflict with a newer version) is retried next round.
func (k *queueKubelet) round(ctx context.Context) {
	now := time.Now()
	for _, r := range k.ledger.snapshot() {
		p := r.pod.DeepCopy()
		if !unfinished(&r) || p.DeletionTimestamp != nil {
			continue
		}
		switch {
		case r.running.IsZero():
			p.Status.Phase = corev1.PodRunning
			p.Status.StartTime = &metav1.Time{Time: now}
			if env.Client.Status().Update(ctx, p) == nil {
				k.ledger.markRunning(p.UID, now)
			}
		case p.Status.Phase != corev1.PodRunning:
			// The watch has not shown it running yet.
		case now.Sub(r.running) < time.Duration(200+hashOf(p.Name)%600)*time.Millisecond:
		case p.Labels[podspec.LabelType] == string(podspec.KindCollector) && k.holdScheduled.Load():
		default:
			ref := metav1.GetControllerOf(p)
			if ref == nil {
				continue
			}
			removed := removedBy(p.Labels[podspec.LabelJob], p.Spec.NodeName)
			sum := workerresult.Summary{Component: "remover", Node: p.Spec.NodeName, Counts: map[string]int{"removed": removed}, BytesFreed: 1000}
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: string(sum.Encode())}}}}
			if env.Client.Status().Update(ctx, p) == nil {
				k.mu.Lock()
				if k.written[ref.UID] == nil {
					k.written[ref.UID] = map[string]int{}
				}
				k.written[ref.UID][p.Spec.NodeName] = removed
				k.mu.Unlock()
			}
		}
	}
}

// removedFor is the sum of what the job's pods reported; every node must
// have reported.
func (k *queueKubelet) removedFor(job types.UID, nodes int) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.written[job]) != nodes {
		k.s.t.Errorf("the kubelet finished job %s's pods on %d nodes, want %d", job, len(k.written[job]), nodes)
	}
	var n int64
	for _, r := range k.written[job] {
		n += int64(r)
	}
	return n
}
