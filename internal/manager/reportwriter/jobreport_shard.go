// Writing one shard so that a retry is safe: a shard found under the name
// being written is read, not assumed.

package reportwriter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// create writes s as the job's next shard and returns the nodes that shard
// holds, st.next and st.shards moved past it. A shard already under that
// name is judged by owner and content:
//   - this job's (its UID in the owner reference): a create that timed out
//     had succeeded, or a restart lost track of it; the nodes it holds are
//     what it stored, whatever this split put in s;
//   - an earlier job's of the same name (another UID), which the garbage
//     collector has not deleted yet: it is deleted, that very object only,
//     and s is written in its place;
//   - another job's (a shortened name shared): the index is passed by.
func (r *Reconciler) create(ctx context.Context, job *eraserv1.ImageJob, st *jobState, s nodereport.Shard) ([]string, error) {
	for ; st.next < eraserv1.MaxReportConfigMaps; st.next++ {
		cm := nodereport.ConfigMap(job, r.opts.Namespace, st.next, s)
		err := r.client.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			stored, skip, ferr := r.found(ctx, job, cm)
			if ferr != nil {
				return nil, ferr
			}
			if skip {
				continue
			}
			if stored == nil {
				// The leftover is gone: write ours.
				err = r.client.Create(ctx, cm)
			} else {
				st.next++
				st.shards = append(st.shards, cm.Name)
				return stored, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("writing report shard %s: %w", cm.Name, err)
		}
		st.next++
		st.shards = append(st.shards, cm.Name)
		return s.Nodes, nil
	}
	return nil, fmt.Errorf("writing the report of job %s: every shard name up to %d is taken", job.Name, eraserv1.MaxReportConfigMaps)
}

// found judges the shard that exists under want's name (see create): this
// job's returns the nodes it holds (never nil); an earlier job's of the
// same name is deleted (nil, false); another job's says skip.
func (r *Reconciler) found(ctx context.Context, job *eraserv1.ImageJob, want *corev1.ConfigMap) (stored []string, skip bool, err error) {
	got := &corev1.ConfigMap{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		// Gone meanwhile, or unreadable: the next pass tries again.
		return nil, false, fmt.Errorf("reading report shard %s, which exists: %w", want.Name, err)
	}
	if nodereport.Ours(got, job) {
		nodes, err := nodereport.Decode(got.BinaryData[nodereport.KeyData])
		if err != nil {
			return nil, false, fmt.Errorf("report shard %s: %w", got.Name, err)
		}
		stored = make([]string, 0, len(nodes))
		for _, n := range nodes {
			stored = append(stored, n.Name)
		}
		return stored, false, nil
	}
	if got.Data[nodereport.KeyJob] != job.Name {
		return nil, true, nil
	}
	uid := got.UID
	if err := r.client.Delete(ctx, got, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("deleting report shard %s left by an earlier job %s: %w", got.Name, job.Name, err)
	}
	return nil, false, nil
}
