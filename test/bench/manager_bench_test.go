//go:build linux && bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/builder"
	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/paths"
	"github.com/eraser-oss/eraser/internal/podspec"
	"github.com/eraser-oss/eraser/internal/testenv"
)

// TestManagerBench measures fan-out and completion on simulated nodes
// (KWOK) against a real API server, and a bare client as the limit:
//
//	make bench-manager   (BENCH_NODES=1000,5000,10000 by default)
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
	sizes := []int{1000, 5000, 10000}
	if s := os.Getenv("BENCH_NODES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	// Each size runs BENCH_REPEAT times: by default three times at 1,000
	// nodes or fewer, where a run takes seconds and one stall of the API
	// server or etcd moves a ratio by a third, and once above.
	repeat, _ := strconv.Atoi(os.Getenv("BENCH_REPEAT"))
	var rows []map[string]any
	var out []map[string]any
	for _, n := range sizes {
		runs := repeat
		if runs <= 0 {
			runs = 1
			if n <= 1000 {
				runs = 3
			}
		}
		var these []map[string]any
		for range runs {
			these = append(these, benchNodes(t, kwok, filepath.Join(dir, "manager"), n))
		}
		rows = append(rows, these...)
		out = append(out, map[string]any{"nodes": n, "runs": these,
			"medianFanoutRatio": median(these, "fanoutRatio"), "medianCompletedRatio": median(these, "completedRatio")})
	}
	fmt.Printf("\n%-6s %9s %9s %9s %9s %7s %9s %9s %7s %9s %9s %8s %8s %8s %8s %8s  %s\n", "NODES", "BARE s", "BARE OK s", "1ST POD s", "FAN-OUT s", "x BARE",
		"LAST OK s", "DONE s", "x OK", "+AFTER s", "CLEANUP s", "WR/NODE", "GET/NODE", "RSS MiB", "(SYNCED)", "CPU ms/n", "CPU SHARES (cores)")
	for _, r := range rows {
		fmt.Printf("%-6d %9.2f %9.2f %9.2f %9.2f %7.2f %9.2f %9.2f %7.2f %9.2f %9.2f %8.2f %8.2f %8.1f %8.1f %8.2f  apiserver %.2f etcd %.2f kwok %.2f manager %.2f (load %s -> %s)\n",
			r["nodes"], r["bareSeconds"], r["bareSucceededSeconds"], r["firstPodSeconds"], r["fanoutSeconds"], r["fanoutRatio"],
			r["lastPodSucceededSeconds"], r["completedSeconds"], r["completedRatio"], r["completedAfterLastPodSeconds"], r["cleanupSeconds"],
			r["writesPerNode"], r["readsPerNode"], r["peakRssMiB"], r["peakRssSyncedMiB"], r["managerCpuMsPerNode"],
			r["cpuShare_kube_apiserver"], r["cpuShare_etcd"], r["cpuShare_kwok"], r["cpuShare_manager"], r["loadBefore"], r["loadAfter"])
	}
	for _, o := range out {
		fmt.Printf("%-6d median of %d run(s): fan-out %.2fx the bare client, Completed %.2fx bare all-Succeeded\n",
			o["nodes"], len(o["runs"].([]map[string]any)), o["medianFanoutRatio"], o["medianCompletedRatio"])
	}
	writeResults(t, "manager", "sizes", out)
}

// median is the median of a figure over runs.
func median(runs []map[string]any, key string) float64 {
	var v []float64
	for _, r := range runs {
		v = append(v, r[key].(float64))
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
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

	// The limit: a bare client creating the same pods with 16 workers, and
	// the time it sees them all Succeeded (KWOK finishing them) through a
	// watch: the manager cannot end a run earlier.
	for _, ns := range []string{"bare", "eraser-system"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// The harness watches pods in protobuf, as kubelets do. KWOK, standing
	// in for the kubelets, watches in JSON: with a JSON harness too, the
	// manager's protobuf watch was the one watch that had the API server
	// encode every pod event a second time, which on a real cluster the
	// kubelet's own watch has already paid for.
	protoCfg := rest.CopyConfig(env.Config)
	protoCfg.ContentType = runtime.ContentTypeProtobuf
	protoCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(protoCfg)
	if err != nil {
		t.Fatal(err)
	}
	// The bare client creates the very pods the manager would (same spec,
	// mounts and security context, built by podspec.Build), so that the
	// ratios measure the manager, not the size of its pods.
	podCfg, _, err := config.Parse([]byte("apiVersion: eraser.sh/v1alpha3\n"))
	if err != nil {
		t.Fatal(err)
	}
	barePod := func(i int) *corev1.Pod {
		node := fmt.Sprintf("node-%05d", i)
		pod, err := podspec.Build(podspec.Params{Job: "bare", JobUID: "bare-uid", Kind: podspec.KindManual, Node: node, OS: paths.Linux,
			Namespace: "bare", Config: podCfg, ConfigMap: "bare", ConfigKey: "config", LogLevel: "error", Batch: i / 500})
		if err != nil {
			t.Fatal(err)
		}
		pod.OwnerReferences = nil
		return pod
	}
	bareWatch := watchPods(t, cs, "bare")
	start := time.Now()
	parallel(16, n, func(i int) {
		if err := c.Create(ctx, barePod(i)); err != nil {
			t.Error(err)
		}
	})
	bare := time.Since(start)
	bareSucceeded := waitSucceeded(t, bareWatch, n, start)
	// Deleted in pages, as the manager deletes its pods, so that the next
	// phase starts on a quiet API server.
	for i := 0; i < n; i += 500 {
		_ = cs.CoreV1().Pods("bare").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{Limit: 500})
	}
	waitCount(t, 5*time.Minute, func() int {
		var pods corev1.PodList
		_ = c.List(ctx, &pods, client.InNamespace("bare"))
		return n - len(pods.Items)
	}, n)

	// The manager: ImageList → all pods created → job Completed → pods
	// deleted (delayOnSuccess 0s, keepReportFor 0s: cleanup is measured).
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	_ = os.WriteFile(cfgFile, []byte("apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 0s, keepReportFor: 0s}}}\n"), 0o644)
	metricsAddr := freeAddr(t)
	args := []string{"--kubeconfig=" + env.KubeconfigPath, "--config=" + cfgFile, "--leader-elect=false",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0", "--log-level=error"}
	pprofAddr := ""
	if os.Getenv("BENCH_PPROF") != "" {
		pprofAddr = freeAddr(t)
		args = append(args, "--pprof-bind-address="+pprofAddr)
	}
	mgr := exec.Command(managerBin, args...)
	mgr.Env = append(os.Environ(), "POD_NAMESPACE=eraser-system")
	if err := mgr.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Process.Kill(); _ = mgr.Wait() }()
	time.Sleep(3 * time.Second) // caches synced
	writesBefore := managerWrites(t, metricsAddr)
	readsBefore := managerRequests(t, metricsAddr, `method="GET"`)
	cpuBefore := processCPU(mgr.Process.Pid)
	// The caches' share of the peak: 10,000 nodes are in them already.
	rssSynced := peakRSS(mgr.Process.Pid)
	sharesBefore := childCPU()
	loadBefore := loadAvg()

	// Count pod creations with a watch: polling thousands of pods would
	// load the API server the manager is being measured against.
	var fanout time.Duration
	var created atomic.Int64
	w := watchPods(t, cs, "eraser-system")
	profile := startProfile(t, pprofAddr, n)
	start = time.Now()
	if err := c.Create(ctx, builder.MakeImageList("bench").Images("*").Obj()); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Minute)
	var lastSucceeded, firstPod time.Duration
	succeeded := 0
	for fanout == 0 || succeeded < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended")
			}
			pod, _ := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Added {
				switch created.Add(1) {
				case 1:
					firstPod = time.Since(start)
				case int64(n):
					fanout = time.Since(start)
				}
			}
			if pod != nil && ev.Type == watch.Modified && pod.Status.Phase == corev1.PodSucceeded && succeeded < n {
				succeeded++
				lastSucceeded = time.Since(start)
			}
		case <-timeout:
			t.Fatalf("after 10 minutes: %d pods created, %d succeeded", created.Load(), succeeded)
		}
	}
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
		time.Sleep(50 * time.Millisecond)
	}
	profile()
	// Cleanup: the job's pods go (delayOnSuccess 0s) in pages that the
	// API server answers in time. Polled (metadata only, once a second): a
	// watch held this long may be ended by the server.
	w.Stop()
	for {
		var pods metav1.PartialObjectMetadataList
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := c.List(ctx, &pods, client.InNamespace("eraser-system")); err == nil && len(pods.Items) == 0 {
			break
		}
		if time.Since(start)-completed > 5*time.Minute {
			t.Fatalf("cleanup: %d pods left after 5 minutes", len(pods.Items))
		}
		time.Sleep(time.Second)
	}
	cleanup := time.Since(start) - completed
	time.Sleep(2 * time.Second) // the job itself is deleted after its pods
	writes := managerWrites(t, metricsAddr) - writesBefore
	reads := managerRequests(t, metricsAddr, `method="GET"`) - readsBefore
	cpu := processCPU(mgr.Process.Pid) - cpuBefore
	shares := childCPU()
	rss := peakRSS(mgr.Process.Pid)
	if completed == 0 || fanout == 0 {
		t.Errorf("%d nodes: fan-out %v, completed %v (pods created %d)", n, fanout, completed, created.Load())
	}
	run := time.Since(start).Seconds()
	row := map[string]any{
		"nodes": n, "bareSeconds": bare.Seconds(), "bareSucceededSeconds": bareSucceeded.Seconds(),
		"fanoutSeconds": fanout.Seconds(), "fanoutRatio": fanout.Seconds() / bare.Seconds(),
		"lastPodSucceededSeconds": lastSucceeded.Seconds(),
		"completedSeconds":        completed.Seconds(), "completedRatio": completed.Seconds() / bareSucceeded.Seconds(),
		"completedAfterLastPodSeconds": (completed - lastSucceeded).Seconds(),
		"cleanupSeconds":               cleanup.Seconds(),
		"writesPerNode":                float64(writes) / float64(n), "readsPerNode": float64(reads) / float64(n), "peakRssMiB": rss, "peakRssSyncedMiB": rssSynced,
		"firstPodSeconds":     firstPod.Seconds(),
		"managerCpuMsPerNode": cpu * 1000 / float64(n),
		"loadBefore":          loadBefore, "loadAfter": loadAvg(),
	}
	for name, v := range shares {
		row["cpuShare_"+name] = (v - sharesBefore[name]) / run
	}
	row["cpuShare_manager"] = cpu / run
	return row
}

// watchPods watches a namespace's pods from now on, resuming where it was
// when the API server ends the watch (it does, under this load).
func watchPods(t *testing.T, cs kubernetes.Interface, ns string) watch.Interface {
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(context.Background(), list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitSucceeded counts pods reported Succeeded on the watch and returns the
// time, from start, the last one was.
func waitSucceeded(t *testing.T, w watch.Interface, n int, start time.Time) time.Duration {
	defer w.Stop()
	seen := map[string]bool{}
	deadline := time.After(10 * time.Minute)
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended")
			}
			if pod, _ := ev.Object.(*corev1.Pod); pod != nil && pod.Status.Phase == corev1.PodSucceeded {
				seen[pod.Name] = true
			}
		case <-deadline:
			t.Fatalf("only %d of %d bare pods succeeded", len(seen), n)
		}
	}
	return time.Since(start)
}

// startProfile takes a CPU profile of the manager over about the run's
// length (20 ms a node: a profile cannot be ended early) and an allocation
// profile at its end, when BENCH_PPROF names a directory.
func startProfile(t *testing.T, addr string, n int) func() {
	dir := os.Getenv("BENCH_PPROF")
	if addr == "" || dir == "" {
		return func() {}
	}
	_ = os.MkdirAll(dir, 0o755)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch(t, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(25, n/50)), filepath.Join(dir, fmt.Sprintf("manager-cpu-%d.pprof", n)))
	}()
	return func() {
		<-done
		fetch(t, "http://"+addr+"/debug/pprof/allocs", filepath.Join(dir, fmt.Sprintf("manager-allocs-%d.pprof", n)))
	}
}

func fetch(t *testing.T, url, file string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Logf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		t.Logf("profile %s: %v", file, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}

// processCPU is a process's user+system CPU time in seconds.
func processCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// childCPU is the CPU time of this test's control plane and KWOK, by name.
func childCPU() map[string]float64 {
	out := map[string]float64{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		switch name {
		case "kube-apiserver", "etcd", "kwok":
			out[strings.ReplaceAll(name, "-", "_")] += processCPU(pid)
		}
	}
	return out
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
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
	return managerRequests(t, addr, `method="POST"`, `method="PUT"`, `method="PATCH"`, `method="DELETE"`)
}

// managerRequests sums the manager's requests of the given methods.
func managerRequests(t *testing.T, addr string, methods ...string) int {
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
		for _, m := range methods {
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
