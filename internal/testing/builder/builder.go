// Package builder makes API objects for tests:
//
//	builder.MakeImageList("imagelist").Images("alpine:3.19").Obj()
//	builder.MakeImageJob("job").Phase(eraserv1.PhaseRunning).Counts(3, 1, 0, 0).Obj()
//
// Tests describe only what matters to them; the builders fill the rest.
package builder

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// ImageListWrapper builds an ImageList.
type ImageListWrapper struct{ eraserv1.ImageList }

// MakeImageList starts an ImageList with the given name.
func MakeImageList(name string) *ImageListWrapper {
	return &ImageListWrapper{eraserv1.ImageList{
		TypeMeta:   metav1.TypeMeta{APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageList"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}}
}

// Images sets spec.images.
func (w *ImageListWrapper) Images(images ...string) *ImageListWrapper {
	w.Spec.Images = images
	return w
}

// DryRun sets spec.dryRun.
func (w *ImageListWrapper) DryRun(on bool) *ImageListWrapper {
	w.Spec.DryRun = on
	return w
}

// Generation sets metadata.generation.
func (w *ImageListWrapper) Generation(g int64) *ImageListWrapper {
	w.ObjectMeta.Generation = g
	return w
}

// ObservedGeneration sets status.observedGeneration: the generation the
// last run applied.
func (w *ImageListWrapper) ObservedGeneration(g int64) *ImageListWrapper {
	w.Status.ObservedGeneration = g
	return w
}

// Created sets metadata.creationTimestamp.
func (w *ImageListWrapper) Created(t time.Time) *ImageListWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Counts sets the node counters of the status.
func (w *ImageListWrapper) Counts(success, failed, skipped int64) *ImageListWrapper {
	w.Status.Success, w.Status.Failed, w.Status.Skipped = success, failed, skipped
	return w
}

// Timestamp sets status.timestamp.
func (w *ImageListWrapper) Timestamp(t metav1.Time) *ImageListWrapper {
	w.Status.Timestamp = &t
	return w
}

// Condition adds or replaces a status condition.
func (w *ImageListWrapper) Condition(c metav1.Condition) *ImageListWrapper {
	w.Status.Conditions = setCondition(w.Status.Conditions, c)
	return w
}

// Started sets the nodes the run's waves reached.
func (w *ImageJobWrapper) Started(n int) *ImageJobWrapper {
	w.Status.Started = n
	return w
}

// FailedIndexes records the failed nodes of a reason, as ranges of indexes
// into the job's node list ("0-3,7").
func (w *ImageJobWrapper) FailedIndexes(reason, ranges string) *ImageJobWrapper {
	if w.Status.FailedIndexes == nil {
		w.Status.FailedIndexes = map[string]string{}
	}
	w.Status.FailedIndexes[reason] = ranges
	return w
}

// Results sets status.results.
func (w *ImageListWrapper) Results(r eraserv1.ImageResults) *ImageListWrapper {
	w.Status.Results = &r
	return w
}

// Obj returns a copy of the built object.
func (w *ImageListWrapper) Obj() *eraserv1.ImageList { return w.ImageList.DeepCopy() }

// ImageJobWrapper builds an ImageJob.
type ImageJobWrapper struct{ eraserv1.ImageJob }

// MakeImageJob starts an ImageJob with the given name.
func MakeImageJob(name string) *ImageJobWrapper {
	return &ImageJobWrapper{eraserv1.ImageJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}}
}

// Label sets a label.
func (w *ImageJobWrapper) Label(k, v string) *ImageJobWrapper {
	metav1.SetMetaDataLabel(&w.ObjectMeta, k, v)
	return w
}

// Annotation sets an annotation.
func (w *ImageJobWrapper) Annotation(k, v string) *ImageJobWrapper {
	metav1.SetMetaDataAnnotation(&w.ObjectMeta, k, v)
	return w
}

// ControlledBy makes the ImageList with uid the job's controller, as the
// manager does for an ImageList's run.
func (w *ImageJobWrapper) ControlledBy(list string, uid types.UID) *ImageJobWrapper {
	w.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageList", Name: list, UID: uid,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	return w
}

// Phase sets status.phase.
func (w *ImageJobWrapper) Phase(p eraserv1.JobPhase) *ImageJobWrapper {
	w.Status.Phase = p
	return w
}

// Counts sets the node counters of the status.
func (w *ImageJobWrapper) Counts(desired, succeeded, failed, skipped int) *ImageJobWrapper {
	w.Status.Desired, w.Status.Succeeded, w.Status.Failed, w.Status.Skipped = desired, succeeded, failed, skipped
	return w
}

// Waiting sets the nodes that wait for another run's worker and the run
// the first of them waits behind.
func (w *ImageJobWrapper) Waiting(n int, behind string) *ImageJobWrapper {
	w.Status.Waiting, w.Status.QueuedBehind = n, behind
	return w
}

// DeleteAfter sets status.deleteAfter.
func (w *ImageJobWrapper) DeleteAfter(t metav1.Time) *ImageJobWrapper {
	w.Status.DeleteAfter = &t
	return w
}

// FailedNode appends a status.failedNodes entry.
func (w *ImageJobWrapper) FailedNode(node, reason, message string) *ImageJobWrapper {
	w.Status.FailedNodes = append(w.Status.FailedNodes, eraserv1.NodeFailure{Node: node, Reason: reason, Message: message})
	return w
}

// Results sets status.results.
func (w *ImageJobWrapper) Results(r eraserv1.ImageResults) *ImageJobWrapper {
	w.Status.Results = &r
	return w
}

// Condition adds or replaces a status condition.
func (w *ImageJobWrapper) Condition(c metav1.Condition) *ImageJobWrapper {
	w.Status.Conditions = setCondition(w.Status.Conditions, c)
	return w
}

// Obj returns a copy of the built object.
func (w *ImageJobWrapper) Obj() *eraserv1.ImageJob { return w.ImageJob.DeepCopy() }

func setCondition(list []metav1.Condition, c metav1.Condition) []metav1.Condition {
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = metav1.Unix(1_700_000_000, 0)
	}
	for i := range list {
		if list[i].Type == c.Type {
			list[i] = c
			return list
		}
	}
	return append(list, c)
}

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a Ready Linux node.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelOSStable: "linux"}},
	}}
}

// Label sets a label.
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Labels[k] = v
	return w
}

// OS sets the kubernetes.io/os label.
func (w *NodeWrapper) OS(os string) *NodeWrapper { return w.Label(corev1.LabelOSStable, os) }

// Taint adds a taint; an empty value makes a key-only taint.
func (w *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return w
}

// Ready sets the node's Ready condition, changed at the given time (zero:
// a condition without a time).
func (w *NodeWrapper) Ready(status corev1.ConditionStatus, since time.Time) *NodeWrapper {
	c := corev1.NodeCondition{Type: corev1.NodeReady, Status: status}
	if !since.IsZero() {
		c.LastTransitionTime = metav1.NewTime(since)
	}
	w.Status.Conditions = []corev1.NodeCondition{c}
	return w
}

// Obj returns a copy of the built object.
func (w *NodeWrapper) Obj() *corev1.Node { return w.Node.DeepCopy() }

// Labels sets metadata.labels on the ImageJob.
func (w *ImageJobWrapper) Labels(kv ...string) *ImageJobWrapper {
	if w.ObjectMeta.Labels == nil {
		w.ObjectMeta.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		w.ObjectMeta.Labels[kv[i]] = kv[i+1]
	}
	return w
}

// PodWrapper builds a worker Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a Pending pod on the node, created at the given time.
func MakePod(name, node string, created time.Time) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

// Running marks the pod Running since the given time.
func (w *PodWrapper) Running(since time.Time) *PodWrapper {
	w.Status.Phase = corev1.PodRunning
	w.Status.StartTime = &metav1.Time{Time: since}
	return w
}

// Phase sets the pod's phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper {
	w.Status.Phase = p
	return w
}

// Terminated adds a terminated container with its exit code and
// termination message.
func (w *PodWrapper) Terminated(container string, exit int32, message string) *PodWrapper {
	w.Status.ContainerStatuses = append(w.Status.ContainerStatuses, corev1.ContainerStatus{Name: container,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}}})
	return w
}

// Waiting adds a container waiting for the reason.
func (w *PodWrapper) Waiting(container, reason string) *PodWrapper {
	w.Status.ContainerStatuses = append(w.Status.ContainerStatuses, corev1.ContainerStatus{Name: container,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	return w
}

// Job labels the pod as a worker of the job.
func (w *PodWrapper) Job(name string) *PodWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[podspec.LabelJob] = name
	return w
}

// Run makes the ImageJob job, of UID run, the pod's controller, as the
// manager creates a run's workers.
func (w *PodWrapper) Run(job string, run types.UID) *PodWrapper {
	w.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: eraserv1.GroupVersion.String(), Kind: "ImageJob", Name: job, UID: run,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	return w.Job(job)
}

// Deleting marks the pod deleted, due to be gone at the given time.
func (w *PodWrapper) Deleting(at time.Time) *PodWrapper {
	w.DeletionTimestamp = &metav1.Time{Time: at}
	return w
}

// Annotate sets an annotation.
func (w *PodWrapper) Annotate(key, value string) *PodWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[key] = value
	return w
}

// Obj returns a copy of the built object.
func (w *PodWrapper) Obj() *corev1.Pod { return w.Pod.DeepCopy() }

// ConfigMapWrapper builds a ConfigMap.
type ConfigMapWrapper struct{ corev1.ConfigMap }

// MakeConfigMap starts a ConfigMap in the namespace.
func MakeConfigMap(namespace, name string) *ConfigMapWrapper {
	return &ConfigMapWrapper{corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// UID sets the ConfigMap's UID.
func (w *ConfigMapWrapper) UID(uid types.UID) *ConfigMapWrapper {
	w.ObjectMeta.UID = uid
	return w
}

// Data sets one key.
func (w *ConfigMapWrapper) Data(key, value string) *ConfigMapWrapper {
	if w.ConfigMap.Data == nil {
		w.ConfigMap.Data = map[string]string{}
	}
	w.ConfigMap.Data[key] = value
	return w
}

// ControlledBy adds a controller owner reference to the ConfigMap owner.
func (w *ConfigMapWrapper) ControlledBy(owner *corev1.ConfigMap) *ConfigMapWrapper {
	yes := true
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes,
	})
	return w
}

// Obj returns a copy of the built object.
func (w *ConfigMapWrapper) Obj() *corev1.ConfigMap { return w.ConfigMap.DeepCopy() }
