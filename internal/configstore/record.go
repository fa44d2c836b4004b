package configstore

import (
	"context"
	"fmt"

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
// owner, writing only when it differs from what is recorded.
func Record(ctx context.Context, c client.Client, owner *corev1.ConfigMap, dataKey string, raw []byte) error {
	key := RecordKey(client.ObjectKeyFromObject(owner))
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true),
			}}},
			Data: map[string]string{dataKey: string(raw)},
		}
		if err := c.Create(ctx, cm); err != nil {
			return fmt.Errorf("recording the last good EraserConfig in %s: %w", key.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the last good EraserConfig record %s: %w", key.Name, err)
	}
	if cm.Data[dataKey] == string(raw) {
		return nil
	}
	cm.Data = map[string]string{dataKey: string(raw)}
	if err := c.Update(ctx, cm); err != nil {
		return fmt.Errorf("recording the last good EraserConfig in %s: %w", key.Name, err)
	}
	return nil
}
