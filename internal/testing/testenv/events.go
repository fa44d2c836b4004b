package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	erasescheme "github.com/eraser-oss/eraser/api/scheme"
)

// Recorder is an event recorder that writes to the API server, as the
// manager's does, for tests that read the Events a reconciler emits.
func (e *Env) Recorder(t testing.TB) record.EventRecorder {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := erasescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme, corev1.EventSource{Component: "eraser-test"})
}

// Events are the Events in namespace about the object named name with the
// reason, as the API server has them.
func (e *Env) Events(t testing.TB, namespace, name, reason string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := e.Client.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.Reason == reason {
			out = append(out, ev)
		}
	}
	return out
}
