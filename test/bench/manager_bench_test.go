//go:build linux && bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/builder"
	"github.com/eraser-oss/eraser/internal/testenv"
)

// TestManagerBench measures fan-out and completion on simulated nodes
// (KWOK) against a real API server, and a bare client as the limit:
//
//	make bench-manager   (BENCH_NODES=1000,5000 by default)
func TestManagerBench(t *testing.T) {
	kwokOut, err := exec.Command("../../hack/build-kwok.sh").Output()
	if err != nil {
		t.Fatalf("building kwok: %v", err)
	}
	kwok := strings.TrimSpace(string(kwokOut))
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", dir+"/", "../../cmd/manager")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	sizes := []int{1000, 5000}
	if s := os.Getenv("BENCH_NODES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	var rows []map[string]any
	for _, n := range sizes {
		rows = append(rows, benchNodes(t, kwok, filepath.Join(dir, "manager"), n))
	}
	fmt.Printf("\n%-6s %12s %14s %10s %16s %10s %12s %14s\n", "NODES", "BARE 16w s", "FAN-OUT s", "x BARE", "TO COMPLETED s", "x BARE", "WRITES/NODE", "PEAK RSS MiB")
	for _, r := range rows {
		fmt.Printf("%-6d %12.2f %14.2f %10.2f %16.2f %10.2f %12.2f %14.1f\n", r["nodes"], r["bareSeconds"], r["fanoutSeconds"], r["fanoutRatio"],
			r["completedSeconds"], r["completedRatio"], r["writesPerNode"], r["peakRssMiB"])
	}
	writeResults(t, "manager", "runs", rows)
}

func benchNodes(t *testing.T, kwok, managerBin string, n int) map[string]any {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	c := env.Client

	stages, _ := filepath.Abs("testdata/kwok-stages.yaml")
	kw := exec.Command(kwok, "--kubeconfig="+env.KubeconfigPath, "--manage-all-nodes", "--config="+stages)
	kw.Stdout, kw.Stderr = nil, nil
	if err := kw.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kw.Process.Kill(); _ = kw.Wait() }()

	parallel(16, n, func(i int) {
		if err := c.Create(ctx, builder.MakeNode(fmt.Sprintf("node-%05d", i)).Obj()); err != nil {
			t.Error(err)
		}
	})
	waitCount(t, 5*time.Minute, func() int {
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
		return ready
	}, n)

	// The limit: a bare client creating the same pods with 16 workers.
	for _, ns := range []string{"bare", "eraser-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	parallel(16, n, func(i int) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bare", Name: fmt.Sprintf("bare-%05d", i)},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%05d", i), RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "example.com/remover:1"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Error(err)
		}
	})
	bare := time.Since(start)
	_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("bare"))

	// The manager: ImageList → all pods created → job Completed.
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	_ = os.WriteFile(cfgFile, []byte("apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 1h}}}\n"), 0o644)
	metricsAddr := freeAddr(t)
	mgr := exec.Command(managerBin, "--kubeconfig="+env.KubeconfigPath, "--config="+cfgFile, "--leader-elect=false",
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address=0", "--log-level=error")
	mgr.Env = append(os.Environ(), "POD_NAMESPACE=eraser-system")
	if err := mgr.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Process.Kill(); _ = mgr.Wait() }()
	time.Sleep(3 * time.Second) // caches synced
	writesBefore := managerWrites(t, metricsAddr)

	// Count pod creations with a watch: polling thousands of pods would
	// load the API server the manager is being measured against.
	var fanout time.Duration
	var created atomic.Int64
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Pods("eraser-system").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := c.Create(ctx, builder.MakeImageList("bench").Images("*").Obj()); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Minute)
	for fanout == 0 {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Added && created.Add(1) == int64(n) {
				fanout = time.Since(start)
			}
		case <-timeout:
			t.Errorf("only %d pods after 10 minutes", created.Load())
			fanout = -1
		}
	}
	w.Stop()
	var completed time.Duration
	for time.Since(start) < 15*time.Minute {
		var list eraserv1.ImageList
		if err := c.Get(ctx, client.ObjectKey{Name: "bench"}, &list); err == nil && list.Status.ObservedGeneration == list.Generation && list.Status.Timestamp != nil {
			completed = time.Since(start)
			if list.Status.Success != int64(n) {
				t.Errorf("%d of %d nodes succeeded", list.Status.Success, n)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	writes := managerWrites(t, metricsAddr) - writesBefore
	rss := peakRSS(mgr.Process.Pid)
	if completed == 0 || fanout == 0 {
		t.Errorf("%d nodes: fan-out %v, completed %v (pods created %d)", n, fanout, completed, created.Load())
	}
	return map[string]any{
		"nodes": n, "bareSeconds": bare.Seconds(), "fanoutSeconds": fanout.Seconds(), "fanoutRatio": fanout.Seconds() / bare.Seconds(),
		"completedSeconds": completed.Seconds(), "completedRatio": completed.Seconds() / bare.Seconds(),
		"writesPerNode": float64(writes) / float64(n), "peakRssMiB": rss,
	}
}

func parallel(workers, n int, f func(i int)) {
	var wg sync.WaitGroup
	ch := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range ch {
				f(i)
			}
		})
	}
	for i := range n {
		ch <- i
	}
	close(ch)
	wg.Wait()
}

func waitCount(t *testing.T, timeout time.Duration, count func() int, want int) {
	deadline := time.Now().Add(timeout)
	for count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d", want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// managerWrites sums the manager's own write requests (client-go's
// rest_client_requests_total by method) from its metrics endpoint.
func managerWrites(t *testing.T, addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		for _, m := range []string{`method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`} {
			if strings.Contains(line, m) {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				total += int(v)
			}
		}
	}
	return total
}

func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kib / 1024
		}
	}
	return 0
}
