package jobdata

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/wire/references"
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
// set and parts are references.Encode's.
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

// LabelReferenceSet names, on a worker pod, the cluster set whose parts it
// mounts: pods in the cache keep their labels but not their volumes, and
// a set's parts are deleted once no unfinished pod carries its name.
const LabelReferenceSet = "eraser.sh/references-set"

// ReferenceSetOf is the set a part of job's cluster set belongs to, read
// from its name (ReferencesName); ok is false for a name of another form.
func ReferenceSetOf(job, name string) (set string, ok bool) {
	rest, ok := strings.CutPrefix(name, job+"-refs-")
	if !ok {
		return "", false
	}
	set, k, ok := strings.Cut(rest, "-")
	if !ok || set == "" || k == "" || strings.Trim(k, "0123456789") != "" {
		return "", false
	}
	return set, true
}

// DeleteReferences deletes the parts of job's cluster sets for which keep
// says false and returns their names. The parts are listed from the API
// server, metadata only (the cache holds none, and each may be 900 KiB);
// a part another run owns is left to the garbage collector, and each
// delete is conditional on the part's UID, so that a part written again
// since the list is kept.
func DeleteReferences(ctx context.Context, c client.Client, existing client.Reader, namespace string, job *eraserv1.ImageJob, keep func(set string) bool) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := existing.List(ctx, list, client.InNamespace(namespace),
		client.MatchingLabels{eraserv1.LabelReferences: "true", podspec.LabelJob: job.Name}); err != nil {
		return nil, fmt.Errorf("listing the parts of the cluster's references: %w", err)
	}
	var deleted []string
	for _, part := range list.Items {
		set, ok := ReferenceSetOf(job.Name, part.Name)
		if !ok || keep(set) || !SameRun(&part, job.UID) || part.DeletionTimestamp != nil {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: part.Namespace, Name: part.Name}}
		err := c.Delete(ctx, cm, client.Preconditions{UID: &part.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return deleted, fmt.Errorf("deleting part %s of a superseded set of the cluster's references: %w", part.Name, err)
		}
		deleted = append(deleted, part.Name)
	}
	return deleted, nil
}
