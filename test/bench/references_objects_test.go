//go:build linux && bench

package bench

// The objects of the reference index's benchmark (internal/testing/benchworkload)
// created through the API server, and the process figures it reads.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
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

// createTemplate creates benchworkload's template i.
func createTemplate(ctx context.Context, cs kubernetes.Interface, i int) error {
	obj, _ := benchworkload.Template(i)
	opts := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		_, err = cs.AppsV1().Deployments(o.Namespace).Create(ctx, o, opts)
	case *appsv1.ReplicaSet:
		_, err = cs.AppsV1().ReplicaSets(o.Namespace).Create(ctx, o, opts)
	case *appsv1.StatefulSet:
		_, err = cs.AppsV1().StatefulSets(o.Namespace).Create(ctx, o, opts)
	case *appsv1.DaemonSet:
		_, err = cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, opts)
	case *batchv1.Job:
		_, err = cs.BatchV1().Jobs(o.Namespace).Create(ctx, o, opts)
	case *batchv1.CronJob:
		_, err = cs.BatchV1().CronJobs(o.Namespace).Create(ctx, o, opts)
	default:
		err = fmt.Errorf("template %d: unexpected %T", i, obj)
	}
	return err
}

// createPod creates benchworkload's pod i on node; with running it then
// reports it Running with every container's image and digest in its
// status (a create ignores the status).
func createPod(ctx context.Context, cs kubernetes.Interface, i int, node string, templates int, running bool) error {
	pod := benchworkload.Pod(i, node, templates, running)
	pods := cs.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil || !running {
		return err
	}
	created.Status = pod.Status
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
