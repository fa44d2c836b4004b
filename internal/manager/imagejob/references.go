package imagejob

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/metrics"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/util/refusal"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// References is what the manager knows of the images the cluster's pods and
// workload templates reference (internal/manager/workloadindex): the workers cannot see
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
// set's ConfigMaps and the set they are of, and the node sets, read as each
// pod is built.
type waveRefs struct {
	set   string
	parts []string
	node  func(string) []references.Ref
}

// errNotSynced: the index has not seen the whole cluster yet; a wave waits
// for it (the error's backoff) rather than start without the references.
var errNotSynced = errors.New("waiting for the reference index to sync (every pod and workload of the cluster) before the next wave")

// waveReferences snapshots the cluster set for the wave about to start:
// pods move and templates change during a rolling job, so each wave gets
// the set of its start. A set the job already wrote is not written again.
// A set that cannot be written whole is written incomplete (its workers
// keep everything a reference could have protected): what a tenant puts
// in a workload never stops a wave. The errors left are the API server's
// (retried) and a part another run owns.
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
	if digest := references.SetDigest(refs); digest != st.refSet {
		enc, names, err := r.writeReferences(ctx, job, refs)
		if err != nil {
			return waveRefs{}, err
		}
		size := 0
		for _, p := range enc.Parts {
			size += len(p)
		}
		log.FromContext(ctx).Info("the cluster's references written for the wave", "set", enc.Set, "parts", len(enc.Parts), "bytes", size,
			"references", len(refs), "incomplete", enc.Incomplete(), "took", r.clock.Since(start).String())
		st.refSet, st.refParts = digest, names
	}
	// Every set has a first part (Encode writes one even for no
	// references); without a set to name, nothing is pruned.
	set := ""
	if len(st.refParts) > 0 {
		set, _ = jobdata.ReferenceSetOf(job.Name, st.refParts[0])
	}
	if set != "" {
		r.pruneReferences(ctx, job, st, set)
	}
	return waveRefs{set: set, parts: st.refParts, node: idx.Node}, nil
}

// writeReferences encodes and writes the cluster set, falling back to the
// incomplete set when it cannot be encoded or the API server refuses its
// parts for what they are (not for a passing reason).
func (r *Reconciler) writeReferences(ctx context.Context, job *eraserv1.ImageJob, refs []references.Ref) (references.Encoded, []string, error) {
	logger := log.FromContext(ctx)
	enc, err := references.Encode(refs, 0)
	var names []string
	if err == nil {
		names, err = jobdata.CreateReferences(ctx, r.client, r.apiReader, r.opts.Namespace, job, enc.Set, enc.Parts)
		if err != nil && !refusal.ForGood(err) {
			return enc, nil, err
		}
	}
	if err != nil {
		logger.Error(err, "the cluster's references cannot be written whole: the wave's workers keep every image a reference could have protected")
		if enc, err = references.EncodeIncomplete(); err != nil {
			return enc, nil, err
		}
		if names, err = jobdata.CreateReferences(ctx, r.client, r.apiReader, r.opts.Namespace, job, enc.Set, enc.Parts); err != nil {
			return enc, nil, err
		}
	}
	if enc.Incomplete() {
		metrics.InputsDropped(metrics.SourceClusterReferences, metrics.ReasonDoesNotFit, enc.Dropped)
		logger.Info("the cluster's references were written incomplete: the wave's workers keep every image from the automatic policies", "set", enc.Set, "referencesLeftOut", enc.Dropped)
		// Once per set written: a job writes a set when its images change,
		// not on every pass.
		r.recorder.Eventf(job, corev1.EventTypeWarning, eraserv1.ReasonReferencesIncomplete,
			"the cluster's references did not fit their parts (%d left out): this wave's workers keep every image from the automatic policies; an ImageList entry still removes what it names", enc.Dropped)
	}
	return enc, names, nil
}

// mountedSets are the cluster sets the job's unfinished pods mount, read
// from their labels, with current, which the wave about to start mounts.
// ok is false when that cannot be told: a pod created whose set the cache
// does not show yet, or one built before pods were labelled with their
// set. A finished pod mounts nothing any longer: its containers have
// exited, and it never starts again.
func mountedSets(pods []*corev1.Pod, namespace string, job *eraserv1.ImageJob, unseen int, current string) (sets map[string]bool, ok bool) {
	if unseen > 0 {
		return nil, false
	}
	sets = map[string]bool{current: true}
	for _, pod := range pods {
		if pod.Namespace != namespace || !jobdata.SameRun(pod, job.UID) || podspec.Finished(pod) {
			continue
		}
		set, labelled := pod.Labels[jobdata.LabelReferenceSet]
		if !labelled {
			return nil, false
		}
		sets[set] = true
	}
	return sets, true
}

// pruneReferences deletes the parts of the job's superseded cluster sets
// that no unfinished pod of the job mounts, at each wave's start: a long
// rolling job whose templates change writes a set a wave, and would
// otherwise keep them all until it is deleted. A failure is logged, never
// the wave's: the parts go with the job in any case.
func (r *Reconciler) pruneReferences(ctx context.Context, job *eraserv1.ImageJob, st *jobState, current string) {
	logger := log.FromContext(ctx)
	pods, err := r.cached.JobPods(job.Name)
	if err != nil {
		logger.Error(err, "reading the job's pods to prune superseded references")
		return
	}
	sets, ok := mountedSets(pods, r.opts.Namespace, job, len(st.created), current)
	if !ok {
		return
	}
	deleted, err := jobdata.DeleteReferences(ctx, r.client, r.apiReader, r.opts.Namespace, job, func(set string) bool { return sets[set] })
	if len(deleted) > 0 {
		logger.Info("superseded cluster references deleted: no unfinished pod of the job mounts them", "parts", deleted)
	}
	if err != nil {
		logger.Error(err, "pruning superseded references")
	}
}
