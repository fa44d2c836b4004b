package workloadindex

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/imageref"
)

// The rules of what counts, as pure functions of one object, so that they
// are tested apart from any API server.

// podCounts is whether a pod's images will be asked for again: every pod
// that has not finished, whatever it waits on (Pending, Running, a restart
// back-off, terminating).
func podCounts(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// podImages is every image a pod names: the spec's images of every
// container kind and of its image volumes, and the status's image and
// imageID of each container and the image each image volume mounts, which
// pin the exact image the node runs after a tag has moved on.
func podImages(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	out = appendVolumeImages(out, p.Spec.Volumes)
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, s := range list {
			out = append(out, s.Image, s.ImageID)
			for _, m := range s.VolumeMounts {
				if v := m.VolumeStatus; v != nil && v.Image != nil {
					out = append(out, v.Image.ImageRef)
				}
			}
		}
	}
	return out
}

// templateImages are the images a pod template starts: its init and
// regular containers (a template has no ephemeral containers) and its
// image volumes.
func templateImages(spec *corev1.PodSpec) []string {
	var out []string
	for _, c := range spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range spec.Containers {
		out = append(out, c.Image)
	}
	return appendVolumeImages(out, spec.Volumes)
}

// appendVolumeImages adds the images the volumes mount (volumes[].image):
// a pod needs them as much as its containers' images.
func appendVolumeImages(out []string, volumes []corev1.Volume) []string {
	for _, v := range volumes {
		if v.Image != nil {
			out = append(out, v.Image.Reference)
		}
	}
	return out
}

// replicaSetCounts: a ReplicaSet scaled to zero is a Deployment's rollout
// history, not something the cluster will run (its Deployment, which is
// indexed, names what will).
func replicaSetCounts(rs *appsv1.ReplicaSet) bool {
	return rs.Spec.Replicas == nil || *rs.Spec.Replicas > 0
}

// jobCounts: a Job that completed or failed starts no more pods.
func jobCounts(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}

// imageList is the form in which an object's images are kept: sorted,
// without duplicates or empty strings, joined by newlines (no reference
// holds one). Objects with the same images, such as the pods of one
// ReplicaSet, then have equal strings, interned once. An image over
// imageref.MaxImageString, or holding a newline, is left out and counted
// in d: no image on a node can be named by it.
func imageList(images []string) (list string, d dropped) {
	images = slices.DeleteFunc(images, func(s string) bool {
		switch {
		case s == "":
			return true
		case len(s) > imageref.MaxImageString:
			d.tooLong++
			d.longest = max(d.longest, len(s))
			return true
		case strings.Contains(s, "\n"):
			d.malformed++
			return true
		}
		return false
	})
	slices.Sort(images)
	return strings.Join(slices.Compact(images), "\n"), d
}

// dropped counts the images left out of one object.
type dropped struct {
	tooLong, malformed int
	// longest is the length of the longest image over the bound.
	longest int
}

func (d dropped) any() bool { return d.tooLong+d.malformed > 0 }
