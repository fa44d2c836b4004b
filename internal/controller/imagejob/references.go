package imagejob

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/jobdata"
	"github.com/eraser-oss/eraser/internal/references"
)

// References is what the manager knows of the images the cluster's pods and
// workload templates reference (internal/refindex): the workers cannot see
// them, and keep no API access to ask.
type References interface {
	// Cluster is the cluster set now: the images of workload templates and
	// of pods not yet scheduled. ok is false until the index has synced: a
	// wave waits rather than start without them.
	Cluster() (refs []references.Ref, ok bool)
	// Node is the node's set now: the images of its unfinished pods.
	Node(name string) []references.Ref
}

// waveRefs are the references a wave's pods are built with: the cluster
// set's ConfigMaps, and the node sets, read as each pod is built.
type waveRefs struct {
	parts []string
	node  func(string) []references.Ref
}

// errNotSynced: the index has not seen the whole cluster yet; a wave waits
// for it (the error's backoff) rather than start without the references.
var errNotSynced = errors.New("waiting for the reference index to sync (every pod and workload of the cluster) before the next wave")

// waveReferences snapshots the cluster set for the wave about to start:
// pods move and templates change during a rolling job, so each wave gets
// the set of its start. A set the job already wrote is not written again.
func (r *Reconciler) waveReferences(ctx context.Context, job *eraserv1.ImageJob, data *jobdata.Data, st *jobState) (waveRefs, error) {
	if data.Config.Manager.Retention.IgnoreReferenced {
		return waveRefs{}, nil
	}
	idx := r.opts.References
	if idx == nil {
		return waveRefs{}, errors.New("the configuration protects referenced images (manager.retention.protectReferenced) and this manager runs no reference index")
	}
	start := r.clock.Now()
	refs, ok := idx.Cluster()
	if !ok {
		return waveRefs{}, errNotSynced
	}
	if set := references.SetDigest(refs); set != st.refSet {
		set, parts, err := references.EncodeCluster(refs, 0)
		if err != nil {
			return waveRefs{}, err
		}
		names, err := jobdata.CreateReferences(ctx, r.client, r.apiReader, r.opts.Namespace, job, set, parts)
		if err != nil {
			return waveRefs{}, err
		}
		size := 0
		for _, p := range parts {
			size += len(p)
		}
		log.FromContext(ctx).Info("the cluster's references written for the wave", "set", set, "parts", len(parts), "bytes", size, "references", len(refs), "took", r.clock.Since(start).String())
		st.refSet, st.refParts = set, names
	}
	return waveRefs{parts: st.refParts, node: idx.Node}, nil
}
