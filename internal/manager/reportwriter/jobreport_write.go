// The write phase: read nodes are flushed into the report's shards, and
// the job is pointed at its report.

package reportwriter

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/refusal"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// flush stores the pending nodes as new shards and points the job at them.
// A node leaves pending once a shard of this job holds it, so a flush that
// fails part way is retried with only the nodes not written yet.
func (r *Reconciler) flush(ctx context.Context, job *eraserv1.ImageJob, st *jobState, complete bool) error {
	for len(st.pending) > 0 {
		shards, err := nodereport.Split(st.pending, nodereport.ShardBudget)
		if err != nil {
			return err
		}
		again := false
		for _, s := range shards {
			if st.next >= eraserv1.MaxReportConfigMaps {
				st.omitted += len(s.Nodes)
				st.unpend(s.Nodes)
				continue
			}
			stored, err := r.create(ctx, job, st, s)
			if refusal.ForGood(err) {
				// The same shard would be refused again, and a report that
				// never completes keeps the run's pods: its nodes are left
				// out, counted, and the report goes on.
				log.FromContext(ctx).Error(err, "a report shard the API server refuses for good: its nodes are left out of the report", "job", job.Name, "nodes", len(s.Nodes))
				st.omitted += len(s.Nodes)
				st.unpend(s.Nodes)
				continue
			}
			if err != nil {
				return err
			}
			for _, n := range stored {
				st.written[n] = true
			}
			st.unpend(stored)
			if !slices.Equal(stored, s.Nodes) {
				// The shard of this index was there already (a create that
				// timed out had succeeded): it holds other nodes than this
				// split's; split what is left again.
				again = true
				break
			}
		}
		if !again {
			break
		}
	}
	st.pending, st.pendingSet, st.pendingEntries = nil, map[string]bool{}, 0
	return r.point(ctx, job, st, complete)
}

// unpend takes nodes out of pending (not out of pendingSet: a node read is
// not read again).
func (st *jobState) unpend(nodes []string) {
	gone := map[string]bool{}
	for _, n := range nodes {
		gone[n] = true
	}
	st.pending = slices.DeleteFunc(st.pending, func(n nodereport.Node) bool { return gone[n.Name] })
	st.pendingEntries = 0
	for _, n := range st.pending {
		st.pendingEntries += len(n.Entries)
	}
}

// point records where the report is in the job's status, touching only
// status.report's own fields (the ImageJob controller owns the rest and
// report.deleteAfter).
func (r *Reconciler) point(ctx context.Context, job *eraserv1.ImageJob, st *jobState, complete bool) error {
	patch := client.MergeFrom(job.DeepCopy())
	ref := job.Status.Report
	if ref == nil {
		ref = &eraserv1.ReportRef{}
	}
	ref.Namespace = r.opts.Namespace
	ref.Selector = nodereport.Selector(job.Name)
	ref.ConfigMaps = slices.Clone(st.shards)
	ref.Nodes = len(st.written)
	ref.OmittedNodes = st.omitted
	ref.Complete = complete
	job.Status.Report = ref
	if err := r.client.Status().Patch(ctx, job, patch); err != nil {
		return fmt.Errorf("pointing job %s at its report: %w", job.Name, err)
	}
	return nil
}

// maxMessage bounds a node's message in the report, as the job's status
// bounds its own.
const maxMessage = 1000

// interner shares the strings of one pass's entries: nodes of one pool
// name the same images, and 100 nodes' entries are held until written.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func newInterner() *interner { return &interner{m: map[string]string{}} }

func (in *interner) get(s string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	in.m[s] = s
	return s
}
