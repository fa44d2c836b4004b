package workloadindex

import (
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kind is one of the watched kinds.
type kind uint8

const (
	kindPod kind = iota
	kindDeployment
	kindStatefulSet
	kindDaemonSet
	kindReplicaSet
	kindJob
	kindCronJob
	numKinds
)

// apiVersion is the kind's group and version, as an Event names it.
func (k kind) apiVersion() string {
	switch k {
	case kindPod:
		return "v1"
	case kindJob, kindCronJob:
		return "batch/v1"
	}
	return "apps/v1"
}

// String is the kind as owners name it ("CronJob default/backup").
func (k kind) String() string {
	return [...]string{"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}[k]
}

// entry is all that is kept of one object: the full object is dropped as
// soon as it is converted, so that 300,000 pods cost tens of bytes each, not
// the kilobytes a decoded pod takes.
//
// It is a runtime.Object so that a list of entries goes through the
// reflector's list path (entryList) as a list of objects would.
type entry struct {
	// key is "<namespace>/<name>".
	key string
	// node is a pod's spec.nodeName: "" while unscheduled.
	node string
	// images is the object's imageList, interned: the pods of one
	// ReplicaSet share one copy. The zero handle: the object does not count
	// (a finished pod, a ReplicaSet at zero, a finished Job), or names no
	// image.
	images unique.Handle[string]
	// set, in the one entry a list returns, is the whole kind as the list
	// built it (the other fields are then empty).
	set *kindSet
}

func (e *entry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (e *entry) DeepCopyObject() runtime.Object { c := *e; return &c }

// counts is whether the object references its images.
func (e *entry) counts() bool { return e.images != unique.Handle[string]{} }

// newEntry interns the images of an object that counts; d is what was left
// out of them.
func newEntry(m *metav1.ObjectMeta, node string, counts bool, images []string) (e *entry, d dropped) {
	e = &entry{key: m.Namespace + "/" + m.Name, node: node}
	if !counts {
		return e, d
	}
	l, d := imageList(images)
	if l != "" {
		e.images = unique.Make(l)
	}
	return e, d
}

// toEntry converts one watched object; an entry (already converted, by the
// reflector's transformer) is returned as it is. ok is false for any other
// type. d is what was left out of the object's images, and who they are.
func toEntry(obj any) (e *entry, d drop, ok bool) {
	var left dropped
	switch o := obj.(type) {
	case *entry:
		return o, d, true
	case *corev1.Pod:
		e, left = newEntry(&o.ObjectMeta, o.Spec.NodeName, podCounts(o), podImages(o))
		d = drop{dropped: left, kind: kindPod, meta: &o.ObjectMeta}
	case *appsv1.Deployment:
		e, left = newEntry(&o.ObjectMeta, "", true, templateImages(&o.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindDeployment, meta: &o.ObjectMeta}
	case *appsv1.StatefulSet:
		e, left = newEntry(&o.ObjectMeta, "", true, templateImages(&o.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindStatefulSet, meta: &o.ObjectMeta}
	case *appsv1.DaemonSet:
		e, left = newEntry(&o.ObjectMeta, "", true, templateImages(&o.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindDaemonSet, meta: &o.ObjectMeta}
	case *appsv1.ReplicaSet:
		e, left = newEntry(&o.ObjectMeta, "", replicaSetCounts(o), templateImages(&o.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindReplicaSet, meta: &o.ObjectMeta}
	case *batchv1.Job:
		e, left = newEntry(&o.ObjectMeta, "", jobCounts(o), templateImages(&o.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindJob, meta: &o.ObjectMeta}
	case *batchv1.CronJob:
		// Suspended too: it is resumed with the same images.
		e, left = newEntry(&o.ObjectMeta, "", true, templateImages(&o.Spec.JobTemplate.Spec.Template.Spec))
		d = drop{dropped: left, kind: kindCronJob, meta: &o.ObjectMeta}
	default:
		return nil, d, false
	}
	return e, d, true
}

// entryList is a page or a whole list of entries, as the list path returns
// it to the reflector instead of the decoded objects.
type entryList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []*entry
}

func (l *entryList) DeepCopyObject() runtime.Object {
	c := &entryList{TypeMeta: l.TypeMeta, Items: make([]*entry, len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i, e := range l.Items {
		c.Items[i] = e.DeepCopyObject().(*entry)
	}
	return c
}
