// Package cacheopts is the manager's informer cache: which objects it holds
// and which of their fields it keeps. The manager and the controllers' tests
// build their caches from the one Options function, so a field a reconciler
// reads and the cache drops fails a test instead of a cluster.
package cacheopts

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// Options keeps the namespaced kinds the manager owns to its own namespace,
// and keeps of nodes and pods only what the controllers read: at 5,000
// nodes full objects would cost more memory than the whole manager is
// allowed. Cached objects are never written back, so trimming them is safe.
// The Stores read the cache's pods and nodes in place, once it has started.
func Options(namespace string) (cache.Options, *Stores) {
	own := cache.Config{}
	stores := &Stores{}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Namespaces: map[string]cache.Config{namespace: own}, Transform: TrimPod},
			// Report shards and the cluster's references (up to 900 KiB
			// each) are read from the API server when needed, never held.
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{namespace: {LabelSelector: notReport}}},
			&corev1.Node{}:      {Transform: TrimNode},
		},
		// Managed fields are never read and are a large share of each object.
		DefaultTransform: cache.TransformStripManagedFields(),
		NewInformer:      stores.newInformer,
	}, stores
}

// notReport selects every ConfigMap but a report shard or a part of the
// cluster's references.
var notReport = func() labels.Selector {
	sel := labels.NewSelector()
	for _, l := range []string{eraserv1.LabelReport, eraserv1.LabelReferences} {
		req, err := labels.NewRequirement(l, selection.DoesNotExist, nil)
		if err != nil {
			panic(err)
		}
		sel = sel.Add(*req)
	}
	return sel
}()

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	// What a worker pod was told of the scan service, its address and the
	// run's DB: a new leader tells those told another address (a previous
	// leader's) and keeps the run on its DB.
	var annotations map[string]string
	for _, k := range []string{scanshare.AnnotationService, scanshare.AnnotationDB} {
		if v, ok := m.Annotations[k]; ok {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = v
		}
	}
	return metav1.ObjectMeta{
		Annotations: annotations,
		Name:        m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		Labels: m.Labels, OwnerReferences: m.OwnerReferences,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}

// TrimPod keeps a worker pod's node, phase, timing and container states
// (with the termination messages the results come from).
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta:   pod.TypeMeta,
		ObjectMeta: trimMeta(pod.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{
			Phase: pod.Status.Phase, Reason: pod.Status.Reason, Message: pod.Status.Message, StartTime: pod.Status.StartTime,
		},
	}
	for _, cs := range pod.Status.ContainerStatuses {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{Name: cs.Name, State: cs.State})
	}
	return out, nil
}

// TrimNode keeps what decides whether a node gets a worker: its labels (the
// node filter, the selector, the OS), its taints (the tolerations) and its
// Ready condition, with when it last changed (how long a node has not been
// Ready bounds a run's wait for it).
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: trimMeta(node.ObjectMeta)}
	out.Spec.Taints = node.Spec.Taints
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return out, nil
}
