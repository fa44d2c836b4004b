//go:build linux && bench

package bench

// The objects of the reference index's benchmark: templates of every
// watched kind and pods bound to the nodes, shaped as a large cluster's
// (100 teams; an app image per workload, a mesh sidecar and init image
// shared by all; a pod's status naming each image by digest).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/testenv"
)

const (
	sidecar   = "registry.example.com/mesh/proxy:1.24.3"
	meshInit  = "registry.example.com/mesh/init:1.24.3"
	teamCount = 100
)

// fastClient creates objects in protobuf, without client-side throttling:
// the API server is the limit.
func fastClient(t *testing.T, env *testenv.Env) kubernetes.Interface {
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func teams() []string {
	var out []string
	for i := range teamCount {
		out = append(out, fmt.Sprintf("team-%03d", i))
	}
	return out
}

// appImage is the image of app a (its templates' and pods').
func appImage(a int) string {
	return fmt.Sprintf("registry.example.com/team-%03d/app-%05d:1.%d.%d", a%teamCount, a, a%7, a%13)
}

// digestOf is the imageID a node reports for an image.
func digestOf(image string) string {
	sum := sha256.Sum256([]byte(image))
	repo, _, _ := strings.Cut(image[strings.LastIndexByte(image, '/')+1:], ":")
	return image[:strings.LastIndexByte(image, '/')+1] + repo + "@sha256:" + hex.EncodeToString(sum[:])
}

func podTemplate(app string, images ...string) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: meshInit}}}
	for i, img := range images {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: img})
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
}

// createTemplate creates template i: of 20, 8 are Deployments, 8
// ReplicaSets (every other one at zero: history), then a StatefulSet, a
// DaemonSet, a Job and a CronJob. Template i runs app i/2: a Deployment
// and its ReplicaSet share their images.
func createTemplate(ctx context.Context, cs kubernetes.Interface, i int) error {
	ns, name, app := fmt.Sprintf("team-%03d", i%teamCount), fmt.Sprintf("w-%05d", i), i/2
	tpl := podTemplate(name, appImage(app), sidecar)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	var err error
	switch k := i % 20; {
	case k < 8:
		_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(i % 4)), Selector: sel, Template: tpl}}, metav1.CreateOptions{})
	case k < 16:
		_, err = cs.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: meta,
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(i % 2)), Selector: sel, Template: tpl}}, metav1.CreateOptions{})
	case k == 16:
		_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), Selector: sel, Template: tpl}}, metav1.CreateOptions{})
	case k == 17:
		_, err = cs.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: meta,
			Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}, metav1.CreateOptions{})
	case k == 18:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		_, err = cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tpl}}, metav1.CreateOptions{})
	default:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		_, err = cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 * * * *",
			Suspend: ptr.To(i%40 == 19), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}, metav1.CreateOptions{})
	}
	return err
}

// createPod creates pod i on node, of app i modulo the templates' apps
// (so an app's pods are spread over the nodes), and with running reports
// it Running with every container's image and digest in its status.
func createPod(ctx context.Context, cs kubernetes.Interface, i int, node string, templates int, running bool) error {
	app := i % max(1, templates/2)
	ns := fmt.Sprintf("team-%03d", app%teamCount)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%05d-%06d", app, i),
		Labels: map[string]string{workloadLabel: "true"}},
		Spec: podTemplate("", appImage(app), sidecar).Spec}
	pod.Spec.NodeName = node
	pods := cs.CoreV1().Pods(ns)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil || !running {
		return err
	}
	created.Status.Phase = corev1.PodRunning
	for _, c := range created.Spec.InitContainers {
		created.Status.InitContainerStatuses = append(created.Status.InitContainerStatuses,
			corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: digestOf(c.Image)})
	}
	for _, c := range created.Spec.Containers {
		created.Status.ContainerStatuses = append(created.Status.ContainerStatuses,
			corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: digestOf(c.Image), Ready: true})
	}
	_, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// vmRSS is a process's resident set now, in MiB.
func vmRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024
		}
	}
	return 0
}

// resetPeakRSS resets this process's VmHWM to its RSS now, so that the
// peak read later is the index's sync, not the objects' creation.
func resetPeakRSS(t *testing.T) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak RSS (%v): it includes the objects' creation", err)
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
