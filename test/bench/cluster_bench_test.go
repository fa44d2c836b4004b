//go:build linux && bench

package bench

// The simulated cluster the manager benchmarks run on: a real API server
// and etcd, KWOK managing n Ready nodes, and the manager binary as a
// process against it.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// buildKwok builds KWOK once (hack/build-kwok.sh caches it) and returns
// its path.
func buildKwok(t *testing.T) string {
	out, err := exec.Command("../../hack/build-kwok.sh").Output()
	if err != nil {
		t.Fatalf("building kwok: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestMain removes the binaries the benchmarks built.
func TestMain(m *testing.M) {
	code := m.Run()
	managertest.Binary.Remove()
	workers.Remove()
	os.Exit(code)
}

// simCluster is a control plane with n KWOK nodes, all Ready, and the
// namespaces "bare" (the bare client's) and "eraser-system" (the manager's).
type simCluster struct {
	env *testenv.Env
	c   client.Client
	// cs watches pods in protobuf, as kubelets do. KWOK, standing in for
	// the kubelets, watches in JSON: with a JSON harness too, the
	// manager's protobuf watch was the one watch that had the API server
	// encode every pod event a second time, which on a real cluster the
	// kubelet's own watch has already paid for.
	cs     kubernetes.Interface
	podCfg *config.Config
	n      int
	// perNode and templates are the cluster's own workload (addWorkload).
	perNode, templates int
	// kwok is KWOK's process ID, kwokIdle its share of a core with the
	// nodes alone.
	kwok     int
	kwokIdle float64
}

// startCluster starts the control plane and KWOK and creates the nodes;
// call the returned function to stop them.
func startCluster(t *testing.T, kwok string, n int) (*simCluster, func()) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client
	stages, _ := filepath.Abs("testdata/kwok-stages.yaml")
	// The cluster's own workload is left alone by KWOK (labelled
	// benchworkload.Label): with 300,000 such pods KWOK matched each against its
	// stages and fell behind the worker pods it finishes.
	kw := exec.Command(kwok, "--kubeconfig="+env.KubeconfigPath, "--manage-all-nodes", "--config="+stages,
		"--disregard-status-with-label-selector="+benchworkload.Label+"=true")
	kw.Stdout, kw.Stderr = nil, nil
	if err := kw.Start(); err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	stop := func() {
		_ = kw.Process.Kill()
		_ = kw.Wait()
		_ = env.Stop()
	}
	parallel.For(16, n, func(i int) {
		if err := c.Create(ctx, builder.MakeNode(benchNode(i)).Obj()); err != nil {
			t.Error(err)
		}
	})
	testenv.WaitFor(t, 5*time.Minute, "every node ready", func() bool {
		var nodes corev1.NodeList
		_ = c.List(ctx, &nodes)
		ready := 0
		for _, nd := range nodes.Items {
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n
	})
	// KWOK's share of a core with only its nodes to keep (their
	// heartbeats): what it settles back to after the workload is created.
	cpu0 := processCPU(kw.Process.Pid)
	time.Sleep(10 * time.Second)
	kwokIdle := (processCPU(kw.Process.Pid) - cpu0) / 10
	for _, ns := range []string{"bare", "eraser-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The install's record, as the chart and manifest create it.
	if _, err := adoption.Since(ctx, c, "eraser-system"); err != nil {
		t.Fatal(err)
	}
	protoCfg := rest.CopyConfig(env.Config)
	protoCfg.ContentType = runtime.ContentTypeProtobuf
	protoCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(protoCfg)
	if err != nil {
		t.Fatal(err)
	}
	podCfg, _, err := config.Parse([]byte("apiVersion: eraser.sh/v1alpha3\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &simCluster{env: env, c: c, cs: cs, podCfg: podCfg, n: n, kwok: kw.Process.Pid, kwokIdle: kwokIdle}, stop
}

// barePod is the pod the manager would create for a job on node i (same
// spec, mounts and security context, built by podspec.Build), so that the
// ratios measure the manager, not the size of its pods.
func (s *simCluster) barePod(t *testing.T, job string, i int) *corev1.Pod {
	node := benchNode(i)
	pod, err := podspec.Build(podspec.Params{Job: job, JobUID: types.UID(job + "-uid"), Kind: podspec.KindManual, Node: node, OS: podpaths.Linux,
		Namespace: "bare", Config: s.podCfg, ConfigMap: "bare", ConfigKey: "config", LogLevel: "error", Batch: i / 500,
		References: []string{"bare-refs-0123456789abcdef-1"}, NodeReferences: s.nodeSet(i)})
	if err != nil {
		t.Fatal(err)
	}
	pod.OwnerReferences = nil
	return pod
}

// clearBare deletes the bare client's pods in pages, as the manager deletes
// its own, and waits until they are gone, so that the next phase starts on
// a quiet API server.
func (s *simCluster) clearBare(t *testing.T, pods int) {
	ctx := context.Background()
	for i := 0; i < pods; i += 500 {
		_ = s.cs.CoreV1().Pods("bare").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{Limit: 500})
	}
	testenv.WaitFor(t, 5*time.Minute, "every bare pod deleted", func() bool {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := s.c.List(ctx, &list, client.InNamespace("bare")); err != nil {
			return false
		}
		return len(list.Items) == 0
	})
}

// benchManager is the manager binary running against the cluster.
type benchManager struct {
	*managertest.Process
	metricsAddr, pprofAddr string
}

// startManager runs the manager (the released binary, the leader at once)
// with the given EraserConfig document; call stop to end it. pprof serves
// profiles too (BENCH_PPROF).
func (s *simCluster) startManager(t *testing.T, cfgDoc string, pprof bool) (m *benchManager, stop func()) {
	m = &benchManager{metricsAddr: freeAddr(t)}
	mgr := managertest.Manager{Kubeconfig: s.env.KubeconfigPath, Namespace: "eraser-system"}
	args := []string{"--leader-elect=false", "--metrics-bind-address=" + m.metricsAddr, "--health-probe-bind-address=0", "--log-level=error"}
	if pprof {
		m.pprofAddr = freeAddr(t)
		args = append(args, "--pprof-bind-address="+m.pprofAddr)
	}
	// BENCH_MANAGER_LOG=file keeps the manager's log (at --log-level=info
	// then) for a run that needs explaining.
	if path := os.Getenv("BENCH_MANAGER_LOG"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		mgr.Log = f
		args = append(args, "--log-level=info")
	}
	m.Process = mgr.Start(t, cfgDoc, args...)
	return m, m.Stop
}

// pid is the manager's process id.
func (m *benchManager) pid() int { return m.Cmd.Process.Pid }

// waitNoPods polls (metadata only, once a second) until the namespace has
// no pods: a watch held this long may be ended by the server.
func (s *simCluster) waitNoPods(t *testing.T, ns string, timeout time.Duration) {
	start := time.Now()
	for {
		var pods metav1.PartialObjectMetadataList
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		err := s.c.List(context.Background(), &pods, client.InNamespace(ns))
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("%d pods left in %s after %v", len(pods.Items), ns, timeout)
		}
		time.Sleep(time.Second)
	}
}
