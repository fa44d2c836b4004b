// Package pause is the manager's side of the cluster-wide pause switch
// (its layout is internal/wire/pause): reading it, selecting it among a
// watch's objects, and the gauge that reports it.
package pause

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pauseswitch "github.com/eraser-oss/eraser/internal/wire/pause"
)

// Read reads the switch in namespace.
func Read(ctx context.Context, c client.Reader, namespace string) (pauseswitch.State, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pauseswitch.Name}, cm)
	if apierrors.IsNotFound(err) {
		return pauseswitch.State{}, nil
	}
	if err != nil {
		return pauseswitch.State{}, fmt.Errorf("reading the pause switch, ConfigMap %s: %w", pauseswitch.Name, err)
	}
	return pauseswitch.Of(cm), nil
}

// Switch selects the switch's ConfigMap among a watch's objects.
func Switch(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetName() == pauseswitch.Name
	})
}
