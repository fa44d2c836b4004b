//go:build linux

package kubelet

// The kubelet tier on CRI-O: one node of the cluster is
// a real kubelet on a real CRI-O (hack/kubecluster -crio-nodes 1), and
// TestCRIONode installs Eraser from the tier's registry with the chart and
// a values file for runtime crio, as a user with CRI-O nodes would.
//
// Why one cluster with the CRI-O node in it, kept out of the other tests'
// way, rather than a cluster of its own: two kubeclusters cannot run at
// once on one machine (one Service address, one bridge namespace), and a
// second cluster after the first would cost its start again (control plane,
// release pulls). The runtime is a cluster-wide setting of Eraser (one
// runtime per configuration), so the other tests' configurations (runtime
// containerd) must not reach the CRI-O node: from the cluster's start it
// carries eraser.sh/cleanup.filter, the label that leaves a node out of
// every run whatever the configuration, and a NoSchedule taint that keeps
// the manager (and anything else scheduled) on the containerd nodes. Their
// runs count it as skipped, never as a success or a failure, and their
// checks name cluster.Nodes, the containerd nodes only. TestCRIONode lifts
// the label for its own runs, whose configuration keeps to the CRI-O nodes
// as a mixed cluster's would (manager.imageJob.nodeSelector on the runtime
// label every kubecluster node carries); the worker pods tolerate every
// taint by default.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

const (
	// runtimeLabel is hack/kubecluster's label of each node's runtime.
	runtimeLabel = "kubecluster.eraser.sh/runtime"
	filterLabel  = "eraser.sh/cleanup.filter"
	// crioAddress is CRI-O's default socket, where the CRI-O node's pods
	// see it.
	crioAddress = "unix:///var/run/crio/crio.sock"
)

var (
	// crioNodes are the cluster's CRI-O nodes (cluster.Nodes are the
	// containerd ones).
	crioNodes []Node
	// crioMissing says why the cluster has no CRI-O node.
	crioMissing string
)

// crioBinDir is where crio and pinns are: CRIO_BIN_DIR (make sets it), else
// hack/build-crio.sh's cache, asked of the script.
func crioBinDir() (string, error) {
	if dir := os.Getenv("CRIO_BIN_DIR"); dir != "" {
		return dir, nil
	}
	out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(repoRoot(), "hack", "build-crio.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("CRI-O is not built (hack/build-crio.sh; make test-e2e-kubelet builds it)")
	}
	return strings.TrimSpace(string(out)), nil
}

// isolateCRIONodes labels and taints the CRI-O nodes (see the top of this
// file), before any test runs.
func isolateCRIONodes() error {
	ctx := context.Background()
	for _, n := range crioNodes {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := clientset.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Labels[filterLabel] = ""
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: runtimeLabel, Value: "crio", Effect: corev1.TaintEffectNoSchedule})
			_, err = clientset.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("keeping CRI-O node %s out of the other tests: %w", n.Name, err)
		}
	}
	return nil
}

// setFiltered puts the cleanup filter label on a node or takes it off.
func setFiltered(t *testing.T, node string, filtered bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, filterLabel)
	if filtered {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, filterLabel)
	}
	if _, err := clientset.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling %s: %v", node, err)
	}
}

// crioValues is the values file a user with CRI-O nodes writes: runtime
// crio at CRI-O's default socket, workers only on the nodes labelled as
// running it; no scheduled runs yet, finished jobs removed at once.
const crioValues = `runtimeConfig:
  manager:
    runtime:
      name: crio
      address: ` + crioAddress + `
    imageJob:
      successRatio: 1.0
      nodeSelector:
        ` + runtimeLabel + `: crio
      cleanup:
        delayOnSuccess: 0s
        delayOnFailure: 1h
        keepReportFor: 0s
  components:
    collector:
      enabled: false
    scanner:
      enabled: false
`

// forCRIO turns one of the tier's configurations (runtime containerd, every
// node) into the same for the CRI-O nodes.
func forCRIO(config string) string {
	out := strings.Replace(config, "    name: containerd\n    address: unix:///run/containerd/containerd.sock\n",
		"    name: crio\n    address: "+crioAddress+"\n", 1)
	return strings.Replace(out, "  imageJob:\n", "  imageJob:\n    nodeSelector:\n      "+runtimeLabel+": crio\n", 1)
}

// TestCRIONode: Eraser from the chart with runtime crio, an ImageList run
// and a scheduled run on the CRI-O node, then uninstalled.
func TestCRIONode(t *testing.T) {
	requireCluster(t)
	if len(crioNodes) == 0 {
		msg := "no CRI-O node in the cluster: " + crioMissing
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, n := range crioNodes {
		setFiltered(t, n.Name, false)
		t.Cleanup(func() { setFiltered(t, n.Name, true) })
	}
	objects := installChartValues(t, crioValues)
	for _, obj := range objects {
		if obj.GetKind() == "ConfigMap" && obj.GetName() == configMap {
			if doc, _ := obj.Object["data"].(map[string]any)[configKey].(string); !strings.Contains(doc, "name: crio") {
				t.Fatalf("the chart rendered no runtime crio from the values:\n%s", doc)
			}
		}
	}

	t.Run("ImageListRemovesAnImageKeepsOneInUse", crioImageList)
	t.Run("ImageListKeepsAMountedImageVolume", crioImageVolume)
	t.Run("ScheduledRunWithTrivyScanner", crioScheduledScan)
	t.Run("ImageListReclaimsOrphanedStorage", crioReclaim)
	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) { uninstall(t, objects) })
}

// crioImageList: an ImageList naming two images removes the one no
// container uses from the CRI-O node and keeps the one a running pod uses;
// the containerd nodes are skipped (nodeSelector), not run.
func crioImageList(t *testing.T) {
	victim, used := crioImage("crio-victim"), crioImage("crio-used")
	pullToCRIO(t, crioNodes, seedImages(t, victim, used)...)
	node := crioNodes[0]
	runPod(t, node.Name, "crio-uses-image", used)

	il := runImageList(t, "crio", victim, used)
	if il.Status.Success != int64(len(crioNodes)) || il.Status.Failed != 0 || il.Status.Skipped != int64(len(cluster.Nodes)) {
		t.Errorf("status: %d succeeded, %d failed, %d skipped; want %d, 0, %d (the containerd nodes)",
			il.Status.Success, il.Status.Failed, il.Status.Skipped, len(crioNodes), len(cluster.Nodes))
	}
	if r := il.Status.Results; r == nil || r.Removed != int64(len(crioNodes)) || r.InUse != 1 || r.BytesFreed <= 0 {
		t.Errorf("results %+v: want %s removed (bytes counted) and %s kept in use", r, victim, used)
	}
	// The remover came from the tier's registry, pulled by CRI-O.
	expectImages(t, node, []string{used, eraserImage("remover"), testcontainerd.SandboxImage}, []string{victim})
	expectJobsCleanedUp(t)
}

// crioImage is a test image in the tier's registry, which the CRI-O node
// pulls from over plain HTTP (its registries.conf says insecure).
func crioImage(name string) string {
	return strings.TrimSuffix(registryPath, "/eraser") + "/e2e/" + name + ":1"
}

// pullToCRIO pushes the images to the tier's registry and has every CRI-O
// node pull them through CRI: CRI-O imports nothing, images reach it by a
// pull, as on a real node.
func pullToCRIO(t *testing.T, nodes []Node, imgs ...testimage.Image) {
	t.Helper()
	pushImages(t, imgs...)
	pullThroughCRI(t, nodes, imgs...)
}

// pullThroughCRI has each node's runtime pull the images from the tier's
// registry through CRI, as a kubelet does: the images get the repository
// digests of a pull.
func pullThroughCRI(t *testing.T, nodes []Node, imgs ...testimage.Image) {
	t.Helper()
	for _, n := range nodes {
		conn, err := grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range imgs {
			for _, tag := range img.Tags {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				_, err := runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: tag}})
				cancel()
				if err != nil {
					_ = conn.Close()
					t.Fatalf("%s: pulling %s: %v", n.Name, tag, err)
				}
			}
		}
		_ = conn.Close()
		var tags []string
		for _, img := range imgs {
			tags = append(tags, img.Tags...)
		}
		expectImages(t, n, tags, nil)
	}
}

// alpineImages are Alpine-like images (an os-release and an apk database,
// as the fixture DB of the scanner module expects: Alpine 3.22) whose musl
// is at the given version, tag → version.
func alpineImages(musl map[string]string) []testimage.Image {
	var imgs []testimage.Image
	for tag, version := range musl {
		imgs = append(imgs, testimage.Image{Tags: []string{tag}, Files: map[string][]byte{
			"etc/alpine-release":   []byte("3.22.1\n"),
			"lib/apk/db/installed": []byte("P:musl\nV:" + version + "\nA:x86_64\no:musl\n\n"),
			"etc/e2e-tag":          []byte(tag),
		}})
	}
	return imgs
}

// crioScheduledScan: a scheduled run with the Trivy scanner on the CRI-O
// node (collector → trivy-scanner → remover in its pod; the scanner reads
// the images from CRI-O's image store at imageFsPath's default,
// /var/lib/containers/storage, mounted read-only) removes the vulnerable
// image, keeps the fixed one, and leaves the scanner's verdicts in the
// run's report.
func crioScheduledScan(t *testing.T) {
	vulnerable, fixed := crioImage("crio-vulnerable"), crioImage("crio-fixed")
	pullToCRIO(t, crioNodes, alpineImages(map[string]string{vulnerable: "1.2.4-r2", fixed: "1.2.5-r0"})...)
	seeded := time.Now()
	createExclusionList(t)
	afterMinAge(seeded)
	// The jobs and their reports are kept, for the scanner's verdicts.
	config := forCRIO(strings.Replace(withRetention(scannerConfig(t), removable), "keepReportFor: 0s", "keepReportFor: 1h", 1))
	setConfig(t, config)
	t.Cleanup(func() { setConfig(t, forCRIO(baseConfig)) })

	eventually(t, 5*time.Minute, "the scanned run to remove the vulnerable image from the CRI-O node", func() (bool, string) {
		var left []string
		for _, n := range crioNodes {
			if nodeImages(t, n)[vulnerable] {
				left = append(left, n.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("still on %v", left)
	})
	for _, n := range crioNodes {
		expectImages(t, n, []string{fixed, eraserImage("eraser-trivy-scanner"), testcontainerd.SandboxImage}, nil)
	}
	// The manager records what the node's scanner handed over.
	eventually(t, time.Minute, "vulnerable_images_run_total for the CRI-O nodes on the manager's metrics endpoint", func() (bool, string) {
		body, err := managerMetrics(testCtx(t))
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, n := range crioNodes {
			if !strings.Contains(body, `vulnerable_images_run_total{node_name="`+n.Name+`"}`) {
				missing = append(missing, n.Name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no series for %v", missing)
	})
	// Air-gapped: the DB seeded on the node, no archive from the manager.
	scanVerdictsInReport(t, crioNodes, vulnerable, fixed, false)
	endScannedRuns(t, forCRIO(baseConfig))
	expectJobsCleanedUp(t)
}
