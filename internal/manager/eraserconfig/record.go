package eraserconfig

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The last good configuration is kept on record in the cluster, in a
// ConfigMap beside the EraserConfig one and owned by it (deleted with it).
// A manager that restarts while the mounted document is one that hot reload
// refused starts with the record instead of crash-looping.
//
// The owner reference always names the live ConfigMap's UID: one deleted
// and created again (kubectl replace --force, a GitOps sync, a Helm
// reinstall) is a new owner, and a record left naming the old UID would be
// deleted by the garbage collector, losing the fallback just when an edit
// is most likely to be refused.

// recordSuffix names the record after the EraserConfig ConfigMap.
const recordSuffix = "-last-good"

// RecordKey is the record's key for the EraserConfig ConfigMap at key.
func RecordKey(key client.ObjectKey) client.ObjectKey {
	return client.ObjectKey{Namespace: key.Namespace, Name: key.Name + recordSuffix}
}

// Recorded reads the recorded document under dataKey; a missing record is
// NotFound.
func Recorded(ctx context.Context, c client.Reader, key client.ObjectKey, dataKey string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, RecordKey(key), cm); err != nil {
		return nil, err
	}
	raw, ok := cm.Data[dataKey]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), cm.Name+" key "+dataKey)
	}
	return []byte(raw), nil
}

// Record keeps raw as the last good document of the EraserConfig ConfigMap
// owner, writing only when the record differs in content or owner.
func Record(ctx context.Context, c client.Client, owner *corev1.ConfigMap, dataKey string, raw []byte) error {
	return write(ctx, c, owner, func(existing *corev1.ConfigMap) *corev1.ConfigMap {
		return desiredRecord(existing, owner, dataKey, raw, true)
	})
}

// Adopt makes the record, if there is one, owned by owner, keeping its
// document: a re-created ConfigMap whose document is refused must not lose
// the record it would fall back to.
func Adopt(ctx context.Context, c client.Client, owner *corev1.ConfigMap) error {
	return write(ctx, c, owner, func(existing *corev1.ConfigMap) *corev1.ConfigMap {
		return desiredRecord(existing, owner, "", nil, false)
	})
}

// write reads the record, asks want for what it should be, and writes it.
func write(ctx context.Context, c client.Client, owner *corev1.ConfigMap, want func(*corev1.ConfigMap) *corev1.ConfigMap) error {
	key := RecordKey(client.ObjectKeyFromObject(owner))
	existing := &corev1.ConfigMap{}
	err := c.Get(ctx, key, existing)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return fmt.Errorf("reading the last good EraserConfig record %s: %w", key.Name, err)
	}
	cm := want(existing)
	switch {
	case cm == nil:
		return nil
	case existing == nil:
		err = c.Create(ctx, cm)
	default:
		// An update carries the read's resourceVersion: a record the
		// garbage collector deleted meanwhile is a conflict, retried.
		err = c.Update(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("recording the last good EraserConfig in %s: %w", key.Name, err)
	}
	return nil
}

// desiredRecord is the record owner should have, given the existing one
// (nil: none), or nil when nothing needs writing. With setData the record
// holds raw under dataKey; without, it keeps its document and is only
// re-owned (and not created).
func desiredRecord(existing, owner *corev1.ConfigMap, dataKey string, raw []byte, setData bool) *corev1.ConfigMap {
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}
	if existing == nil {
		if !setData {
			return nil
		}
		key := RecordKey(client.ObjectKeyFromObject(owner))
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{ref}},
			Data:       map[string]string{dataKey: string(raw)},
		}
	}
	cm := existing.DeepCopy()
	if setData {
		cm.Data = map[string]string{dataKey: string(raw)}
	}
	// The record has one owner, the live ConfigMap: any other reference
	// (an earlier ConfigMap of the same name) is dropped.
	cm.OwnerReferences = []metav1.OwnerReference{ref}
	if maps.Equal(cm.Data, existing.Data) && ownedOnlyBy(existing, ref) {
		return nil
	}
	return cm
}

// ownedOnlyBy reports whether ref is cm's one owner reference.
func ownedOnlyBy(cm *corev1.ConfigMap, ref metav1.OwnerReference) bool {
	refs := cm.OwnerReferences
	return len(refs) == 1 && refs[0].UID == ref.UID && refs[0].Name == ref.Name && refs[0].Kind == ref.Kind &&
		refs[0].APIVersion == ref.APIVersion && ptr.Deref(refs[0].Controller, false)
}
