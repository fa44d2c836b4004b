//go:build linux

package kubelet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// leaderReplacedMidRun: the manager's pod is replaced by a new one, at a
// new address and with an empty disk, while a scanning run's scanners have
// yet to reach it. The old manager makes the run's pods and is then frozen
// (SIGSTOP) before any of their containers start, and its pod deleted at
// once, so that it serves nothing of the run. The new manager takes the
// lease, fetches the run's DB archive by its digest, and tells the running
// scanners its address on their pods; the kubelet projects it into the
// scanners' file. The run ends with every node judged with the run's one
// archive, and the new vulnerable image gone from every node.
func leaderReplacedMidRun(t *testing.T, db *dbRegistry) {
	t.Helper()
	ctx := testCtx(t)
	vulnerable := testImage("vulnerable-replaced")
	seedAlpine(t, cluster.Nodes, map[string]string{vulnerable: "1.2.4-r2"})
	t.Cleanup(func() {
		for _, n := range cluster.Nodes {
			removeImages(t, n, vulnerable)
		}
	})
	afterMinAge(time.Now())
	old := managerPodObject(ctx)
	if old == nil || old.Status.PodIP == "" {
		t.Fatal("no running manager pod")
	}
	pid := managerProcess(t)
	fetched := db.archives(t)

	job := runScheduledNow(t)
	// The old manager's pods, seen as soon as they exist: a pod's
	// containers start a second or more after it is made (its sandbox
	// first), so none of its scanners has asked the old manager yet.
	deadline := time.Now().Add(time.Minute)
	for {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{podspec.LabelJob: job.Name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == len(cluster.Nodes) {
			break
		}
		if time.Now().After(deadline) {
			dump(t)
			t.Fatalf("run %s: %d worker pods within a minute, want %d", job.Name, len(pods.Items), len(cluster.Nodes))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freezing the manager (pid %d): %v", pid, err)
	}
	// Deleted at once, the pod is replaced now; the kubelet kills the
	// frozen process (SIGKILL needs no thawing).
	if err := clientset.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		t.Fatal(err)
	}
	t.Logf("run %s: manager pod %s (%s) frozen with the run's %d pods made, and deleted", job.Name, old.Name, old.Status.PodIP, len(cluster.Nodes))

	var replacement *corev1.Pod
	eventually(t, 3*time.Minute, "a new manager pod, at a new address, telling the running scanners where it is", func() (bool, string) {
		pod := managerPodObject(ctx)
		if pod == nil || pod.Name == old.Name || pod.Status.PodIP == "" {
			return false, "no new manager pod with an address yet"
		}
		logs, err := clientset.CoreV1().Pods(namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		if !bytes.Contains(logs, []byte("told the running scanners the scan service's new address")) {
			return false, "pod " + pod.Name + " has not told the scanners yet"
		}
		replacement = pod
		return true, ""
	})
	if replacement.Status.PodIP == old.Status.PodIP {
		t.Errorf("the new manager pod has the old one's address %s", old.Status.PodIP)
	}

	var ended *eraserv1.ImageJob
	eventually(t, 6*time.Minute, "run "+job.Name+"'s complete report", func() (bool, string) {
		j := &eraserv1.ImageJob{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return false, err.Error()
		}
		if rep := j.Status.Report; rep == nil || !rep.Complete {
			return false, fmt.Sprintf("phase %q, report %+v", j.Status.Phase, j.Status.Report)
		}
		ended = j
		return true, ""
	})
	if ended.Status.Phase != eraserv1.PhaseCompleted {
		t.Errorf("run %s ended %s, want Completed: %+v", ended.Name, ended.Status.Phase, ended.Status)
	}
	nodes, err := reportNodes(ctx, ended)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(cluster.Nodes) {
		t.Errorf("run %s: %d nodes in the report, want %d", ended.Name, len(nodes), len(cluster.Nodes))
	}
	archives := map[string]bool{}
	for _, n := range nodes {
		if n.ScanDB == nil || n.ScanDB.Archive == "" {
			t.Errorf("node %s judged with %+v, want the run's archive", n.Name, n.ScanDB)
			continue
		}
		archives[n.ScanDB.Archive] = true
		var verdict string
		for _, e := range n.Entries {
			if e.Image == vulnerable && e.Scan != nil {
				verdict = e.Scan.Verdict
			}
		}
		if verdict != "vulnerable" {
			t.Errorf("node %s: verdict on %s %q, want vulnerable", n.Name, vulnerable, verdict)
		}
	}
	if len(archives) != 1 {
		t.Errorf("the nodes judged with %d DB archives, want the run's one", len(archives))
	}
	goneFromEveryNode(t, 2*time.Minute, "the vulnerable image judged after the manager's replacement", vulnerable)
	// The new manager's disk is new: it fetched the run's archive by its
	// digest, once.
	if got := db.archives(t); got != fetched+1 {
		t.Errorf("the DB's archive was downloaded %d times in all, want %d (once more, by the new manager)", got, fetched+1)
	}
	t.Logf("run %s: manager replaced by %s (%s); every node judged with archive %v", ended.Name, replacement.Name, replacement.Status.PodIP, archives)
}

// managerProcess finds the manager's process on this host (the nodes'
// processes share the host's process namespace), by its argument.
func managerProcess(t *testing.T) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var found []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, arg := range strings.Split(string(b), "\x00") {
			if arg == "--config=/config/controller_manager_config.yaml" {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				found = append(found, pid)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("manager processes on this host: %v, want one", found)
	}
	return found[0]
}
