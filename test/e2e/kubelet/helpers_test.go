//go:build linux

package kubelet

// What the tier's tests share: runs, configuration, the nodes' images
// through CRI, waiting, and what a failed test dumps.

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
	"github.com/eraser-oss/eraser/internal/manager/configstore"
	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
)

// kubectlEraser runs the kubectl plugin through the real kubectl, as an
// operator would, and returns its output.
func kubectlEraser(t *testing.T, args ...string) string {
	t.Helper()
	plugin := filepath.Join(workDir, "plugins", "kubectl-eraser")
	if _, err := os.Stat(plugin); err != nil {
		build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-eraser")
		build.Dir = repoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building kubectl-eraser: %v: %s", err, out)
		}
	}
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
	ctx := testCtx(t)
	il := &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: eraserv1.ImageListSpec{Images: images}}
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
	t.Logf("ImageList %s: %d succeeded, %d failed, results %+v", name, il.Status.Success, il.Status.Failed, il.Status.Results)
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

func createExclusionList(t *testing.T) {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-exclusions", Namespace: namespace,
			Labels: map[string]string{"eraser.sh/exclude.list": "true"}},
		Data: map[string]string{"e2e.json": exclusionList()},
	}
	if err := kube.Create(testCtx(t), cm); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func setConfig(t *testing.T, config string) {
	t.Helper()
	var cm corev1.ConfigMap
	ctx := testCtx(t)
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: configMap}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[configKey] = config
	if err := kube.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	// The manager records a document once it is in force: from then on
	// every new job runs with it, so no scenario races the reload.
	eventually(t, time.Minute, "the manager to apply the configuration", func() (bool, string) {
		got, err := configstore.Recorded(ctx, kube, client.ObjectKeyFromObject(&cm), configKey)
		if err != nil {
			return false, err.Error()
		}
		return string(got) == config, "an earlier document is in force"
	})
}

// runPod runs a container from image on the node until the test ends.
func runPod(t *testing.T, node, name, image string) {
	t.Helper()
	ctx := testCtx(t)
	pod := &corev1.Pod{
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

// seed imports images, each with its own content (so its own ID), into the
// nodes' runtimes.
func seed(t *testing.T, nodes []Node, tags ...string) {
	t.Helper()
	pause := testcontainerd.Pause(t)
	var imgs []testcontainerd.Image
	for _, tag := range tags {
		imgs = append(imgs, testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: 64 << 10})
	}
	importImages(t, nodes, imgs)
	for _, n := range nodes {
		expectImages(t, n, tags, nil)
	}
}

// goneFromEveryNode waits until no node has the image.
func goneFromEveryNode(t *testing.T, timeout time.Duration, what, image string) {
	t.Helper()
	eventually(t, timeout, what, func() (bool, string) {
		var left []string
		for _, n := range cluster.Nodes {
			if nodeImages(t, n)[image] {
				left = append(left, n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("still on %v", left)
	})
}

// importImages builds the images and imports them into every node's
// runtime as pulled images: with the repository digest of a pull, which the
// automatic policies may remove (imported_test.go).
func importImages(t *testing.T, nodes []Node, imgs []testcontainerd.Image) {
	t.Helper()
	importUnpulled(t, nodes, imgs)
	for _, n := range nodes {
		addRepoDigests(t, n, imgs)
	}
}

// seedAlpine imports Alpine-like images (an os-release and an apk
// database, as the fixture DB of the scanner module expects: Alpine 3.22)
// whose musl is at the given version, tag → version.
func seedAlpine(t *testing.T, nodes []Node, musl map[string]string) {
	t.Helper()
	var imgs []testcontainerd.Image
	for tag, version := range musl {
		imgs = append(imgs, testcontainerd.Image{Tags: []string{tag}, Files: map[string][]byte{
			"etc/alpine-release":   []byte("3.22.1\n"),
			"lib/apk/db/installed": []byte("P:musl\nV:" + version + "\nA:x86_64\no:musl\n\n"),
			"etc/e2e-tag":          []byte(tag),
		}})
	}
	importImages(t, nodes, imgs)
}

func criClient(t *testing.T, n Node) *cri.Client {
	t.Helper()
	c, err := cri.Dial(testCtx(t), "unix://"+n.Socket, cri.DefaultTimeouts)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodeImages lists the tags on the node, asking its runtime directly.
func nodeImages(t *testing.T, n Node) map[string]bool {
	t.Helper()
	imgs, err := criClient(t, n).ListImages(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	out := map[string]bool{}
	for _, img := range imgs {
		for _, tag := range img.Tags {
			out[tag] = true
		}
	}
	return out
}

func nodeContainers(t *testing.T, n Node) []cri.Container {
	t.Helper()
	cs, err := criClient(t, n).ListContainers(testCtx(t))
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return cs
}

func expectImages(t *testing.T, n Node, present, absent []string) {
	t.Helper()
	have := nodeImages(t, n)
	for _, img := range present {
		if !have[img] {
			t.Errorf("%s: %s was removed; want it kept", n.Name, img)
		}
	}
	for _, img := range absent {
		if have[img] {
			t.Errorf("%s: %s is still there; want it removed", n.Name, img)
		}
	}
}

// eventually polls cond until it holds; on timeout it prints what the
// cluster holds and fails the test.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			dump(t)
			t.Fatalf("waiting %s for %s: %s", timeout, what, detail)
		}
		time.Sleep(250 * time.Millisecond)
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
