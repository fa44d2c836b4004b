package jobdata

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/references"
)

// ReferencesName is the ConfigMap of part k (from 1) of a job's cluster set:
// named by the set's digest, so that the waves of a job whose templates did
// not change share the parts, and a changed set never overwrites the parts
// pods of an earlier wave still mount.
func ReferencesName(job, set string, k int) string {
	return fmt.Sprintf("%s-refs-%s-%d", job, set, k)
}

// CreateReferences writes the cluster set for a wave of job and returns its
// ConfigMaps' names in part order. Parts there already are of this set (the
// name says so) and are kept; one that another job owns (a job deleted and
// created again by the name, its dependents not yet collected) is
// ErrConflict: pods must not mount what the garbage collector will delete.
// existing reads the API server, not the cache, which holds no parts.
// set and parts are references.EncodeCluster's.
func CreateReferences(ctx context.Context, c client.Client, existing client.Reader, namespace string, job *eraserv1.ImageJob, set string, parts [][]byte) ([]string, error) {
	names := make([]string, len(parts))
	for k, data := range parts {
		names[k] = ReferencesName(job.Name, set, k+1)
		meta := owned(job, namespace, names[k])
		meta.Labels[eraserv1.LabelReferences] = "true"
		cm := &corev1.ConfigMap{ObjectMeta: meta, Immutable: ptr.To(true), BinaryData: map[string][]byte{references.PartKey: data}}
		err := c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			found := &corev1.ConfigMap{}
			if err := existing.Get(ctx, client.ObjectKeyFromObject(cm), found); err != nil {
				return nil, fmt.Errorf("reading ConfigMap %s, which exists: %w", cm.Name, err)
			}
			if !SameRun(found, job.UID) {
				return nil, conflict("ConfigMap", found, job.UID)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("writing part %d of %d of the cluster's references: %w", k+1, len(parts), err)
		}
	}
	return names, nil
}
