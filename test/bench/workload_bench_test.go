//go:build bench

package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// The cluster's own workload in the manager benchmark: the pods and
// templates whose images the manager's reference index keeps and writes
// into every wave. Its pods stay Pending, bound to their nodes
// (the KWOK stages run only the bare and eraser-system namespaces' pods):
// unfinished, so every one is in its node's set.

// workloadSize is BENCH_PODS_PER_NODE (default 30) and BENCH_TEMPLATES
// (default 20,000): 0 for either leaves it out.
func workloadSize() (perNode, templates int) {
	perNode, templates = 30, 20000
	if s, ok := os.LookupEnv("BENCH_PODS_PER_NODE"); ok {
		perNode, _ = strconv.Atoi(s)
	}
	if s, ok := os.LookupEnv("BENCH_TEMPLATES"); ok {
		templates, _ = strconv.Atoi(s)
	}
	return perNode, templates
}

// addWorkload creates the templates and perNode pods on each of the
// cluster's nodes, and returns how long it took.
func (s *simCluster) addWorkload(t *testing.T, perNode, templates int) time.Duration {
	start := time.Now()
	ctx := context.Background()
	cs := fastClient(t, s.env)
	for _, ns := range benchworkload.Namespaces() {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var failed atomic.Int64
	fail := func(err error) {
		if err != nil && failed.Add(1) <= 5 {
			t.Error(err)
		}
	}
	parallel.For(48, templates, func(i int) { fail(createTemplate(ctx, cs, i)) })
	parallel.For(48, s.n*perNode, func(i int) { fail(createPod(ctx, cs, i, benchNode(i/perNode), templates, false)) })
	if hugeReference() {
		fail(createHugeReference(ctx, cs))
	}
	s.perNode, s.templates = perNode, templates
	// KWOK drops the workload's events, but decodes each: both clients
	// start once it has caught up (its nodes' heartbeats go on).
	settleCPUBelow(t, "KWOK", s.kwok, max(0.1, 1.5*s.kwokIdle), 10*time.Minute)
	return time.Since(start)
}

// nodeSet is node i's set as the manager writes it into the node's pod
// (the images of the Pending pods createPod bound to it), so that the bare
// client's pods are as large as the manager's.
func (s *simCluster) nodeSet(i int) string {
	var refs []references.Ref
	for j := i * s.perNode; j < (i+1)*s.perNode; j++ {
		pod := benchworkload.Pod(j, "", s.templates, false)
		owner := references.Owner("Pod", pod.Namespace, pod.Name)
		for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
			refs = append(refs, references.Ref{Image: c.Image, Owner: owner})
		}
	}
	return references.EncodeNode(refs)
}

// settleCPU waits until the process used under 50 ms of CPU in two
// seconds (its informers and the reference index synced), at most limit,
// and returns how long that took.
func settleCPU(t *testing.T, pid int, limit time.Duration) time.Duration {
	return settleCPUBelow(t, "the manager", pid, 0.025, limit)
}

// settleCPUBelow waits until the process used under share of a core over
// two seconds, at most limit, and returns how long that took.
func settleCPUBelow(t *testing.T, what string, pid int, share float64, limit time.Duration) time.Duration {
	start := time.Now()
	last := processCPU(pid)
	for time.Since(start) < limit {
		time.Sleep(2 * time.Second)
		cpu := processCPU(pid)
		if cpu-last < 2*share {
			return time.Since(start)
		}
		last = cpu
	}
	t.Logf("%s's CPU did not settle under %.2f of a core in %v", what, share, limit)
	return time.Since(start)
}

// hugeReference is BENCH_HUGE_REFERENCE=1: one Deployment (scaled to zero)
// among the templates whose image is 1.2 MB of random characters, as any
// tenant may write. The manager leaves it out of the references; the run
// must go as fast as without it.
func hugeReference() bool { return os.Getenv("BENCH_HUGE_REFERENCE") == "1" }

// hugeImageBytes is the tenant's image string's length.
const hugeImageBytes = 1228821

func createHugeReference(ctx context.Context, cs kubernetes.Interface) error {
	raw := make([]byte, hugeImageBytes*3/4+3)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	image := base64.RawURLEncoding.EncodeToString(raw)[:hugeImageBytes]
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchworkload.Team(0), Name: "tenant-huge-image"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tenant-huge-image"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tenant-huge-image"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}},
	}
	_, err := cs.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	return err
}
