package workloadindex

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Builders of the watched objects, for the tables and the API server test.

type podBuilder struct{ p corev1.Pod }

func makePod(ns, name string) *podBuilder {
	return &podBuilder{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

func (b *podBuilder) node(n string) *podBuilder { b.p.Spec.NodeName = n; return b }

func (b *podBuilder) label(k, v string) *podBuilder {
	if b.p.Labels == nil {
		b.p.Labels = map[string]string{}
	}
	b.p.Labels[k] = v
	return b
}

func (b *podBuilder) init(images ...string) *podBuilder {
	b.p.Spec.InitContainers = append(b.p.Spec.InitContainers, containers("init", images)...)
	return b
}

func (b *podBuilder) containers(images ...string) *podBuilder {
	b.p.Spec.Containers = append(b.p.Spec.Containers, containers("c", images)...)
	return b
}

func (b *podBuilder) ephemeral(images ...string) *podBuilder {
	for _, c := range containers("debug", images) {
		b.p.Spec.EphemeralContainers = append(b.p.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}})
	}
	return b
}

func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.p.Status.Phase = p; return b }

// volumes adds volumes: image volumes of the references, an emptyDir for "".
func (b *podBuilder) volumes(refs ...string) *podBuilder {
	b.p.Spec.Volumes = append(b.p.Spec.Volumes, volumes(refs)...)
	return b
}

// mountStatus adds a container status whose one volume mount shows the
// image it mounts, as the kubelet reports an image volume.
func (b *podBuilder) mountStatus(imageRef string) *podBuilder {
	b.p.Status.ContainerStatuses = append(b.p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "m",
		VolumeMounts: []corev1.VolumeMountStatus{{Name: "data", MountPath: "/data", VolumeStatus: &corev1.VolumeStatus{Image: &corev1.ImageVolumeStatus{ImageRef: imageRef}}}}})
	return b
}

// status adds a container status (image, imageID) to the list of that kind.
func (b *podBuilder) status(kind, image, imageID string) *podBuilder {
	s := corev1.ContainerStatus{Name: kind, Image: image, ImageID: imageID}
	switch kind {
	case "init":
		b.p.Status.InitContainerStatuses = append(b.p.Status.InitContainerStatuses, s)
	case "ephemeral":
		b.p.Status.EphemeralContainerStatuses = append(b.p.Status.EphemeralContainerStatuses, s)
	default:
		b.p.Status.ContainerStatuses = append(b.p.Status.ContainerStatuses, s)
	}
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.p.DeepCopy() }

func containers(prefix string, images []string) []corev1.Container {
	var out []corev1.Container
	for i, img := range images {
		out = append(out, corev1.Container{Name: prefix + string(rune('a'+i)), Image: img,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent})
	}
	return out
}

// template is a pod template with init and regular containers.
func template(app string, init []string, images ...string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{InitContainers: containers("init", init), Containers: containers("c", images)},
	}
}

// volumes are image volumes of the references, and an emptyDir for "".
func volumes(refs []string) []corev1.Volume {
	var out []corev1.Volume
	for i, ref := range refs {
		v := corev1.Volume{Name: fmt.Sprint("v", i)}
		if ref == "" {
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		} else {
			v.Image = &corev1.ImageVolumeSource{Reference: ref, PullPolicy: corev1.PullIfNotPresent}
		}
		out = append(out, v)
	}
	return out
}

// withVolumes adds volumes (see volumes) to a workload's pod template.
func withVolumes[T any](obj T, refs ...string) T {
	var spec *corev1.PodSpec
	switch o := any(obj).(type) {
	case *appsv1.Deployment:
		spec = &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = &o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		spec = &o.Spec.Template.Spec
	case *batchv1.Job:
		spec = &o.Spec.Template.Spec
	case *batchv1.CronJob:
		spec = &o.Spec.JobTemplate.Spec.Template.Spec
	default:
		panic(fmt.Sprintf("withVolumes: %T has no pod template", obj))
	}
	spec.Volumes = append(spec.Volumes, volumes(refs)...)
	return obj
}

func objMeta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func makeDeployment(ns, name string, replicas int32, init []string, images ...string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: objMeta(ns, name), Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas),
		Selector: selector(name), Template: template(name, init, images...)}}
}

func makeStatefulSet(ns, name string, replicas int32, images ...string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: objMeta(ns, name), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas),
		Selector: selector(name), Template: template(name, nil, images...)}}
}

func makeDaemonSet(ns, name string, images ...string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: objMeta(ns, name), Spec: appsv1.DaemonSetSpec{
		Selector: selector(name), Template: template(name, nil, images...)}}
}

func makeReplicaSet(ns, name string, replicas int32, images ...string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: objMeta(ns, name), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas),
		Selector: selector(name), Template: template(name, nil, images...)}}
}

func makeJob(ns, name string, images ...string) *batchv1.Job {
	t := template(name, nil, images...)
	t.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{ObjectMeta: objMeta(ns, name), Spec: batchv1.JobSpec{Template: t}}
}

// finished sets a Job's condition (Complete or Failed) to True.
func finished(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.Job {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue})
	return j
}

func makeCronJob(ns, name string, suspend bool, images ...string) *batchv1.CronJob {
	t := template(name, nil, images...)
	t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return &batchv1.CronJob{ObjectMeta: objMeta(ns, name), Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", Suspend: ptr.To(suspend),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: t}}}}
}
