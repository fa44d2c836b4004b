// Package benchworkload makes the workloads of the benchmarks that measure
// the reference index, in process (internal/manager/workloadindex) and through an API
// server (test/bench): templates of every watched kind and pods bound to
// nodes, shaped as a large cluster's. 100 teams; an app image per two
// templates; a mesh sidecar and init image in every pod; a Running pod's
// status naming each image by digest. Both benchmarks build the same
// objects so that their figures compare.
package benchworkload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	Sidecar  = "registry.example.com/mesh/proxy:1.24.3"
	MeshInit = "registry.example.com/mesh/init:1.24.3"
	Teams    = 100
	// Label marks the workload's pods: KWOK is told to leave them as
	// created (--disregard-status-with-label-selector).
	Label = "bench.eraser.sh/workload"
)

// Team is the namespace of team i.
func Team(i int) string { return fmt.Sprintf("team-%03d", i%Teams) }

// Namespaces are the teams' namespaces.
func Namespaces() []string {
	out := make([]string, Teams)
	for i := range out {
		out[i] = Team(i)
	}
	return out
}

// Node is node n's name.
func Node(n int) string { return fmt.Sprintf("node-%05d", n) }

// AppImage is the image of app a (its templates' and pods').
func AppImage(a int) string {
	return fmt.Sprintf("registry.example.com/team-%03d/app-%05d:1.%d.%d", a%Teams, a, a%7, a%13)
}

// Digest is the imageID a node reports for an image: "<repo>@sha256:<hex>".
func Digest(image string) string {
	sum := sha256.Sum256([]byte(image))
	slash := strings.LastIndexByte(image, '/')
	repo, _, _ := strings.Cut(image[slash+1:], ":")
	return image[:slash+1] + repo + "@sha256:" + hex.EncodeToString(sum[:])
}

// PodSpec is a pod with the mesh's init container and one container per
// image.
func PodSpec(images ...string) corev1.PodSpec {
	spec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: MeshInit}}}
	for i, img := range images {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: img})
	}
	return spec
}

// Template is template n, running app n/2 (a Deployment and its
// ReplicaSet share their images). Of every 20: 8 Deployments (replicas
// n%4, so some at zero), 8 ReplicaSets (the even ones at zero: history),
// a StatefulSet, a DaemonSet, a Job and a CronJob (every other one
// suspended). Zero says whether it is a ReplicaSet at zero, which the
// index does not hold.
func Template(n int) (obj any, zero bool) {
	name := fmt.Sprintf("w-%05d", n)
	meta := metav1.ObjectMeta{Namespace: Team(n), Name: name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: PodSpec(AppImage(n/2), Sidecar)}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	switch m := n % 20; {
	case m < 8:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(n % 4)), Selector: sel, Template: tpl}}, false
	case m < 16:
		return &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(n % 2)), Selector: sel, Template: tpl}}, n%2 == 0
	case m == 16:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), Selector: sel, Template: tpl}}, false
	case m == 17:
		return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}, false
	case m == 18:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tpl}}, false
	}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", Suspend: ptr.To(n%40 == 19),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}, false
}

// ExpectedTemplates is how many of n templates the index holds (not the
// ReplicaSets at zero) and how many images their cluster set names: each
// app's image, the sidecar and the init image.
func ExpectedTemplates(n int) (held, refs int) {
	apps := map[int]bool{}
	for i := range n {
		if _, zero := Template(i); !zero {
			held++
			apps[i/2] = true
		}
	}
	return held, len(apps) + 2
}

// PodName is pod n's namespace and name: app n modulo the templates' apps,
// so that an app's pods spread over the nodes.
func PodName(n, templates int) (namespace, name string) {
	app := n % max(1, templates/2)
	return Team(app), fmt.Sprintf("app-%05d-%06d", app, n)
}

// Pod is pod n, bound to node, with its app's image and the sidecar;
// with running, it is Running and its status names every container's
// image and digest. Its strings are its own, as a decoded pod's are.
func Pod(n int, node string, templates int, running bool) *corev1.Pod {
	ns, name := PodName(n, templates)
	app := n % max(1, templates/2)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{Label: "true"}},
		Spec: PodSpec(AppImage(app), Sidecar)}
	p.Spec.NodeName = node
	if running {
		p.Status = RunningStatus(p.Spec)
	}
	return p
}

// RunningStatus is the status of a Running pod of the spec: each
// container's image, its digest, and the regular containers ready.
func RunningStatus(spec corev1.PodSpec) corev1.PodStatus {
	st := corev1.PodStatus{Phase: corev1.PodRunning}
	for _, c := range spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: Digest(c.Image)})
	}
	for _, c := range spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: Digest(c.Image), Ready: true})
	}
	return st
}
