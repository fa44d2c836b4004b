//go:build linux && bench

package bench

// What the manager benchmarks share: watching pods, the processes' CPU and
// memory, the manager's request counts, waiting.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

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

// watchPods watches a namespace's pods from now on, resuming where it was
// when the API server ends the watch (it does, under this load).
func watchPods(t *testing.T, cs kubernetes.Interface, ns string) watch.Interface {
	list, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return retryWatch(t, list.ResourceVersion, cs.CoreV1().Pods(ns).Watch)
}

// retryWatch watches from the resource version on, resuming where it was
// when the API server ends the watch.
func retryWatch(t *testing.T, rv string, open func(context.Context, metav1.ListOptions) (watch.Interface, error)) watch.Interface {
	w, err := watchtools.NewRetryWatcherWithContext(context.Background(), rv, &cache.ListWatch{WatchFuncWithContext: open})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// waitSucceeded counts pods reported Succeeded on the watch, calling
// finished for each, and returns the time, from start, the last one was.
// It may run on its own goroutine: it reports failures with t.Errorf.
func waitSucceeded(t *testing.T, w watch.Interface, n int, start time.Time, finished func()) time.Duration {
	defer w.Stop()
	seen := map[string]bool{}
	deadline := time.After(10 * time.Minute)
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Errorf("the watch ended")
				return 0
			}
			if pod, _ := ev.Object.(*corev1.Pod); pod != nil && pod.Status.Phase == corev1.PodSucceeded && !seen[pod.Name] {
				seen[pod.Name] = true
				finished()
			}
		case <-deadline:
			t.Errorf("only %d of %d bare pods succeeded", len(seen), n)
			return 0
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

// childCPU is the CPU time of this test's control plane and KWOK, by name:
// processes this test started, not those of other tests on the machine.
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
			if descends(pid, os.Getpid()) {
				out[strings.ReplaceAll(name, "-", "_")] += processCPU(pid)
			}
		}
	}
	return out
}

// descends is whether pid is a descendant of ancestor (a few levels up).
func descends(pid, ancestor int) bool {
	for range 4 {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		if len(f) < 2 {
			return false
		}
		if pid, _ = strconv.Atoi(f[1]); pid == ancestor {
			return true
		}
		if pid <= 1 {
			return false
		}
	}
	return false
}

func loadAvg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// waitReportComplete polls the job until its report is complete and
// returns when that was seen, from start; 0 if the job went first or it
// took over ten minutes (the pods' wait for the report).
func waitReportComplete(ctx context.Context, c client.Client, job string, start time.Time) time.Duration {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		var j eraserv1.ImageJob
		if err := c.Get(ctx, client.ObjectKey{Name: job}, &j); err != nil {
			return 0
		}
		if r := j.Status.Report; r != nil && r.Complete {
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0
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
