// Which logs a pass reads. Reads that fail (a node gone, a kubelet port
// firewalled from the control plane, simulated nodes) are bounded: each log
// gets openTimeout to start, a streak of failures stops a pass's reads, and
// the job's failed reads are capped; but the readable nodes are found
// wherever they sort, by probing logs spread across the unread ones and
// going on reading from a probe that succeeded.

package reportwriter

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/util/textcut"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

const (
	// maxFailStreak is the failed reads in a row after which a pass stops
	// reading in order and the next ones probe.
	maxFailStreak = 32
	// maxFailedReads bounds a job's failed log reads: past it, once reads
	// fail again, the nodes not read yet are recorded without entries. With
	// openTimeout per read and fetchWorkers at a time, the failed reads
	// cost at most about maxFailedReads/fetchWorkers*openTimeout (under six
	// minutes), well within the ten minutes the pods wait for the report.
	maxFailedReads = 512
)

// gather reads this pass's share of todo (the finished pods not in the
// report yet, by node name) and returns their nodes: those read, or tried
// and failed, each with its own error; or, once the job's failed reads are
// spent and reads still fail, every one left, saying why it was not read.
//
// Reads go in name order from the cursor (the last probe that succeeded),
// up to fetchBatch, and stop after maxFailStreak failures in a row. Then
// passes probe fetchWorkers logs spread evenly across the unread nodes;
// the first (by name) that succeeds becomes the cursor and reading in
// order resumes there (or where its pool begins, see probe). So a pool of unreachable nodes that sorts first
// costs a streak and some probes, and the pools after it are read.
func (r *Reconciler) gather(ctx context.Context, todo []*corev1.Pod, st *jobState) []nodereport.Node {
	switch {
	case len(todo) == 0:
		return nil
	case st.failStreak < maxFailStreak && st.failed < maxFailedReads+maxFailStreak:
		batch := fromCursor(todo, st.cursor)
		return r.fetch(ctx, batch[:min(len(batch), fetchBatch)], st, true)
	case st.failed >= maxFailedReads:
		msg := textcut.Cut(fmt.Sprintf("not read: %d log reads of this job failed (the most it tries), %d of them in a row, the last: %s",
			st.failed, st.failStreak, st.lastErr), maxMessage)
		out := make([]nodereport.Node, len(todo))
		for i, p := range todo {
			out[i] = NodeOf(p)
			out[i].Unavailable = msg
		}
		return out
	default:
		return r.probe(ctx, todo, st)
	}
}

// probe reads logs spread evenly across todo: fetchWorkers at first, twice
// as many after each probe that found none. If one is read, the first (by
// name) is a node of a readable pool, and the pool may begin before it:
// probe bisects between it and the failed probe before it, so that reading
// in order resumes where the readable nodes begin.
//
// Why the probes grow: passes are passInterval apart, and a job none of
// whose logs can be read (kubelets the control plane cannot reach, or
// simulated nodes) spent its failed reads 16 a pass, holding its pods
// about a minute; growing, the budget is spent in five passes. Failed
// reads cost the same time in all (openTimeout each, fetchWorkers at once),
// however they are grouped.
func (r *Reconciler) probe(ctx context.Context, todo []*corev1.Pod, st *jobState) []nodereport.Node {
	at := spread(len(todo), min(fetchWorkers<<min(st.fruitless, 8), maxFailedReads-st.failed))
	probes := make([]*corev1.Pod, len(at))
	for i, k := range at {
		probes[i] = todo[k]
	}
	out := r.fetch(ctx, probes, st, false)
	first := slices.IndexFunc(out, func(n nodereport.Node) bool { return n.Unavailable == "" })
	if first < 0 {
		st.fruitless++
		return out
	}
	st.fruitless = 0
	lo, hi := -1, at[first]
	if first > 0 {
		lo = at[first-1]
	}
	for hi-lo > 1 && st.failed < maxFailedReads {
		mid := lo + (hi-lo)/2
		n := r.fetch(ctx, todo[mid:mid+1], st, false)[0]
		out = append(out, n)
		if n.Unavailable == "" {
			hi = mid
		} else {
			lo = mid
		}
	}
	st.cursor, st.failStreak = todo[hi].Spec.NodeName, 0
	return out
}

// fromCursor is todo starting after the node cursor, wrapping around.
func fromCursor(todo []*corev1.Pod, cursor string) []*corev1.Pod {
	i := sort.Search(len(todo), func(i int) bool { return todo[i].Spec.NodeName > cursor })
	return slices.Concat(todo[i:], todo[:i])
}

// spread is k indexes of n at even intervals, each the middle of its share.
func spread(n, k int) []int {
	k = min(k, n)
	out := make([]int, k)
	for i := range k {
		out[i] = (2*i + 1) * n / (2 * k)
	}
	return out
}

// fetch reads the pods' nodes in parallel and counts the failures in st.
// With stopOnStreak, it starts no read once maxFailStreak reads failed in a
// row; it returns the nodes of the pods it read, in order.
func (r *Reconciler) fetch(ctx context.Context, pods []*corev1.Pod, st *jobState, stopOnStreak bool) []nodereport.Node {
	out := make([]nodereport.Node, len(pods))
	var mu sync.Mutex
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		// Reads finish out of order, so a read of a healthy node can
		// reset a streak that the reads after it had begun: the streak
		// alone does not bound a job's failed reads, the hard cap does.
		return stopOnStreak && (st.failStreak >= maxFailStreak || st.failed >= maxFailedReads+maxFailStreak)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	intern := newInterner()
	for range min(fetchWorkers, len(pods)) {
		wg.Go(func() {
			for i := range work {
				n := r.node(ctx, pods[i], intern)
				mu.Lock()
				out[i] = n
				if n.Unavailable != "" {
					st.failStreak++
					st.failed++
					st.lastErr = n.Unavailable
				} else {
					st.failStreak = 0
				}
				mu.Unlock()
			}
		})
	}
	sent := 0
	for sent < len(pods) && !stopped() {
		work <- sent
		sent++
	}
	close(work)
	wg.Wait()
	return out[:sent]
}
