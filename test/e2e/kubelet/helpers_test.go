//go:build linux

package kubelet

// What the tier's tests share: the install's names, runs, waiting, and
// what a failed test dumps.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/wait"
)

const (
	namespace  = "eraser-system"
	managerApp = "eraser-controller-manager"
	configMap  = "eraser-manager-config"
	configKey  = "controller_manager_config.yaml"
	labelJob   = "eraser.sh/job"
)

// kubectlEraser runs the kubectl plugin through the real kubectl, as an
// operator would, and returns its output.
func kubectlEraser(t *testing.T, args ...string) string {
	t.Helper()
	plugin := kubectlPlugin.Path(t)
	cmd := exec.Command(filepath.Join(assetsDir, "kubectl"), append([]string{"eraser"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "PATH="+filepath.Dir(plugin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl eraser %v: %v: %s", args, err, out)
	}
	return string(out)
}

// runImageList creates an ImageList, waits for its run to finish and be
// recorded, and returns it.
func runImageList(t *testing.T, name string, images ...string) *eraserv1.ImageList {
	t.Helper()
	return runList(t, &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: eraserv1.ImageListSpec{Images: images}})
}

// runList creates il, waits for its run to finish and be recorded, and
// returns it.
func runList(t *testing.T, il *eraserv1.ImageList) *eraserv1.ImageList {
	t.Helper()
	ctx := testCtx(t)
	name := il.Name
	if err := kube.Create(ctx, il); err != nil {
		t.Fatalf("creating ImageList %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), il) })
	eventually(t, 3*time.Minute, "ImageList "+name+" to record its run", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(il), il); err != nil {
			return false, err.Error()
		}
		return il.Status.Timestamp != nil && il.Status.ObservedGeneration == il.Generation,
			fmt.Sprintf("status %+v", il.Status)
	})
	t.Logf("ImageList %s: %d succeeded, %d failed, %d skipped, results %+v", name, il.Status.Success, il.Status.Failed, il.Status.Skipped, il.Status.Results)
	return il
}

// expectJobsCleanedUp waits until no ImageJob is left, nor any pod or
// ConfigMap of one.
func expectJobsCleanedUp(t *testing.T) {
	t.Helper()
	ctx := testCtx(t)
	eventually(t, 2*time.Minute, "jobs, their pods and ConfigMaps to be removed", func() (bool, string) {
		var jobs eraserv1.ImageJobList
		var pods corev1.PodList
		var cms corev1.ConfigMapList
		if err := kube.List(ctx, &jobs); err != nil {
			return false, err.Error()
		}
		if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{labelJob}); err != nil {
			return false, err.Error()
		}
		if err := kube.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{labelJob}); err != nil {
			return false, err.Error()
		}
		return len(jobs.Items)+len(pods.Items)+len(cms.Items) == 0,
			fmt.Sprintf("%d jobs, %d pods, %d ConfigMaps", len(jobs.Items), len(pods.Items), len(cms.Items))
	})
}

// runPod runs a container from image on the node until the test ends.
func runPod(t *testing.T, node, name, image string) {
	t.Helper()
	startPod(t, podOn(node, name, image))
}

// podOn is the pod runPod runs.
func podOn(node, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			// The CRI-O nodes are tainted (isolateCRIONodes).
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullNever,
			}},
		},
	}
}

// startPod creates the pod and waits until it runs; it is deleted when the
// test ends.
func startPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	ctx := testCtx(t)
	name := pod.Name
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), pod)
		eventually(t, 2*time.Minute, "pod "+name+" to be gone", func() (bool, string) {
			err := kube.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
	})
	eventually(t, 2*time.Minute, "pod "+name+" to run", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == corev1.PodRunning, fmt.Sprintf("phase %s", pod.Status.Phase)
	})
}

// eventually polls cond until it holds; on timeout it prints what the
// cluster holds and fails the test.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var detail string
	if err := wait.Until(timeout, func() (bool, error) {
		var ok bool
		ok, detail = cond()
		return ok, nil
	}); err != nil {
		dump(t)
		t.Fatalf("waiting %s for %s: %s", timeout, what, detail)
	}
}

// dump logs the state of Eraser's objects and the manager's last log lines.
func dump(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(namespace)); err == nil {
		for _, p := range pods.Items {
			var states []string
			for _, s := range p.Status.ContainerStatuses {
				states = append(states, fmt.Sprintf("%s=%+v", s.Name, s.State))
			}
			t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, strings.Join(states, " "))
		}
	}
	var jobs eraserv1.ImageJobList
	if err := kube.List(ctx, &jobs); err == nil {
		for _, j := range jobs.Items {
			t.Logf("ImageJob %s: %+v", j.Name, j.Status)
		}
	}
	logs, err := clientset.CoreV1().Pods(namespace).GetLogs(managerPod(ctx), &corev1.PodLogOptions{TailLines: ptr.To[int64](40)}).DoRaw(ctx)
	if err == nil {
		t.Logf("manager log (last lines):\n%s", logs)
	}
}

// managerMetrics reads the manager's Prometheus endpoint at its pod's IP
// (the nodes' pod networks are bridges on this host).
func managerMetrics(ctx context.Context) (string, error) {
	pod := managerPodObject(ctx)
	if pod == nil || pod.Status.PodIP == "" {
		return "", errors.New("no manager pod with an IP")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(pod.Status.PodIP, "8889")+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func managerPod(ctx context.Context) string {
	if pod := managerPodObject(ctx); pod != nil {
		return pod.Name
	}
	return ""
}

func managerPodObject(ctx context.Context) *corev1.Pod {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil || len(pods.Items) == 0 {
		return nil
	}
	return &pods.Items[0]
}

// policyResult is the job's total for one policy (zero when absent).
func policyResult(r *eraserv1.ImageResults, p eraserv1.RemovalPolicy) eraserv1.PolicyResult {
	if r != nil {
		for _, pr := range r.Policies {
			if pr.Policy == p {
				return pr
			}
		}
	}
	return eraserv1.PolicyResult{Policy: p}
}

// finishedScheduledJob waits for a scheduled job, a dry run or not, to
// complete, and returns it. The configuration in force decides what the
// next job is: jobs started before it came in force (dry runs, when a real
// run is wanted) are told apart by the dry-run annotation.
func finishedScheduledJob(t *testing.T, dryRun bool) *eraserv1.ImageJob {
	t.Helper()
	var found *eraserv1.ImageJob
	eventually(t, 4*time.Minute, fmt.Sprintf("a scheduled job (dry run: %v) to complete", dryRun), func() (bool, string) {
		var jobs eraserv1.ImageJobList
		if err := kube.List(testCtx(t), &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range jobs.Items {
			j := &jobs.Items[i]
			seen = append(seen, fmt.Sprintf("%s %s", j.Name, j.Status.Phase))
			if (j.Annotations[eraserv1.AnnotationDryRun] == "true") != dryRun {
				continue
			}
			if j.Status.Phase == eraserv1.PhaseCompleted && j.Status.Results != nil {
				found = j
				return true, ""
			}
			if j.Status.Phase == eraserv1.PhaseFailed {
				t.Fatalf("scheduled job %s failed: %+v", j.Name, j.Status)
			}
		}
		return false, fmt.Sprintf("jobs: %v", seen)
	})
	t.Logf("ImageJob %s: results %+v", found.Name, found.Status.Results)
	return found
}

// stopScheduledRuns turns scheduled runs off, waits for the one going to
// end, and deletes the jobs kept for their status.
func stopScheduledRuns(t *testing.T) {
	t.Helper()
	setConfig(t, baseConfig)
	ctx := testCtx(t)
	eventually(t, 3*time.Minute, "the scheduled run going to end", func() (bool, string) {
		var jobs eraserv1.ImageJobList
		if err := kube.List(ctx, &jobs); err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			if j.Status.Phase == "" || j.Status.Phase == eraserv1.PhaseRunning {
				return false, j.Name + " is running"
			}
		}
		return true, ""
	})
	if err := kube.DeleteAllOf(ctx, &eraserv1.ImageJob{}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	expectJobsCleanedUp(t)
}
