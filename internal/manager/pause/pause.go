// Package pause is the cluster-wide switch that holds every new run and
// wave: the ConfigMap eraser-pause in the manager's namespace. While it
// exists no ImageList, schedule, catch-up or run-now request starts a run,
// and running runs create no more worker pods; the workers already running
// finish. Deleting it resumes: a held list or request runs then, a
// scheduled run that came due meanwhile starts, and each running run goes
// on from the node it stopped at.
//
// A ConfigMap rather than a configuration key: pausing is an operator's act
// in the moment (kubectl eraser pause), which a GitOps sync of the
// configuration must not undo; it can still be declared in Git as an object
// of its own.
package pause

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Name is the switch's ConfigMap, in the manager's namespace.
const Name = "eraser-pause"

// Keys of the switch's data, both optional.
const (
	// KeyReason says why, for whoever finds the cluster paused.
	KeyReason = "reason"
	// KeyBy says who paused it.
	KeyBy = "by"
)

// State is the switch as read.
type State struct {
	Paused bool
	// Since is when it was paused: the ConfigMap's creation.
	Since  time.Time
	Reason string
	By     string
}

// Of reads the switch from its ConfigMap (nil: not paused).
func Of(cm *corev1.ConfigMap) State {
	if cm == nil || !cm.DeletionTimestamp.IsZero() {
		return State{}
	}
	return State{Paused: true, Since: cm.CreationTimestamp.Time, Reason: cm.Data[KeyReason], By: cm.Data[KeyBy]}
}

// Read reads the switch in namespace.
func Read(ctx context.Context, c client.Reader, namespace string) (State, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: Name}, cm)
	if apierrors.IsNotFound(err) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading the pause switch, ConfigMap %s: %w", Name, err)
	}
	return Of(cm), nil
}

// Message says what is held and how to resume.
func (s State) Message(held string) string {
	if !s.Paused {
		return ""
	}
	msg := fmt.Sprintf("%s: Eraser is paused", held)
	if !s.Since.IsZero() {
		msg += " since " + s.Since.UTC().Format(time.RFC3339)
	}
	if s.By != "" {
		msg += " by " + s.By
	}
	if s.Reason != "" {
		msg += " (" + s.Reason + ")"
	}
	return msg + fmt.Sprintf("; running workers finish, nothing new starts until ConfigMap %s is deleted (kubectl eraser resume)", Name)
}

// New is the switch as `kubectl eraser pause` creates it.
func New(namespace, reason, by string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name}, Data: map[string]string{}}
	if reason != "" {
		cm.Data[KeyReason] = reason
	}
	if by != "" {
		cm.Data[KeyBy] = by
	}
	return cm
}

// Switch selects the switch's ConfigMap among a watch's objects.
func Switch(namespace string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetName() == Name
	})
}
