//go:build linux && bench

package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestManagerBench measures fan-out and completion on simulated nodes
// (KWOK) against a real API server, and a bare client as the limit:
//
//	make bench-manager   (BENCH_NODES=1000,5000,10000 by default)
func TestManagerBench(t *testing.T) {
	kwok := buildKwok(t)
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
			these = append(these, benchNodes(t, kwok, n))
		}
		rows = append(rows, these...)
		out = append(out, map[string]any{"nodes": n, "runs": these,
			"medianFanoutRatio": median(these, "fanoutRatio"), "medianCompletedRatio": median(these, "completedRatio")})
	}
	if p, tpl := workloadSize(); p > 0 || tpl > 0 {
		fmt.Printf("\nwith the cluster's own workload: %d pods per node (Pending, bound) and %d templates (BENCH_PODS_PER_NODE, BENCH_TEMPLATES)\n", p, tpl)
	}
	fmt.Printf("\n%-6s %9s %9s %9s %9s %7s %9s %9s %7s %9s %9s %8s %8s %8s %8s %8s %8s  %s\n", "NODES", "BARE s", "BARE OK s", "1ST POD s", "FAN-OUT s", "x BARE",
		"LAST OK s", "DONE s", "x OK", "+AFTER s", "CLEANUP s", "(REPORT)", "WR/NODE", "GET/NODE", "RSS MiB", "(SYNCED)", "CPU ms/n", "CPU SHARES (cores)")
	for _, r := range rows {
		fmt.Printf("%-6d %9.2f %9.2f %9.2f %9.2f %7.2f %9.2f %9.2f %7.2f %9.2f %9.2f %8.2f %8.2f %8.2f %8.1f %8.1f %8.2f  apiserver %.2f etcd %.2f kwok %.2f manager %.2f (load %s -> %s)\n",
			r["nodes"], r["bareSeconds"], r["bareSucceededSeconds"], r["firstPodSeconds"], r["fanoutSeconds"], r["fanoutRatio"],
			r["lastPodSucceededSeconds"], r["completedSeconds"], r["completedRatio"], r["completedAfterLastPodSeconds"], r["cleanupSeconds"],
			r["reportCompleteAfterCompletedSeconds"], r["writesPerNode"], r["readsPerNode"], r["peakRssMiB"], r["peakRssSyncedMiB"], r["managerCpuMsPerNode"],
			r["cpuShare_kube_apiserver"], r["cpuShare_etcd"], r["cpuShare_kwok"], r["cpuShare_manager"], r["loadBefore"], r["loadAfter"])
	}
	for _, r := range rows {
		printRecords(r)
	}
	for _, o := range out {
		fmt.Printf("%-6d median of %d run(s): fan-out %.2fx the bare client, Completed %.2fx bare all-Succeeded (maxWorkerPods %v, the bare client bounded alike)\n",
			o["nodes"], len(o["runs"].([]map[string]any)), o["medianFanoutRatio"], o["medianCompletedRatio"], o["runs"].([]map[string]any)[0]["maxWorkerPods"])
	}
	writeResults(t, "manager", "sizes", out)
}

func benchNodes(t *testing.T, kwok string, n int) map[string]any {
	s, stop := startCluster(t, kwok, n)
	defer stop()
	ctx := context.Background()
	c, cs := s.c, s.cs
	// The cluster's own pods and templates, there before either client
	// runs: the manager indexes them and writes their images into its pods.
	var workloadCreate time.Duration
	if perNode, templates := workloadSize(); perNode > 0 || templates > 0 {
		workloadCreate = s.addWorkload(t, perNode, templates)
	}

	// The manager's bound on unfinished worker pods (maxWorkerPods) as the
	// environment says (BENCH_MAX_WORKER_PODS; the default 1,000 when
	// unset, 0 none): it paces a run of more nodes by how fast pods
	// finish, and the bare client keeps to the same bound, so that the
	// ratios measure the manager, not the bound.
	bound, maxPods := config.DefaultMaxWorkerPods, ""
	if v, ok := os.LookupEnv("BENCH_MAX_WORKER_PODS"); ok {
		var err error
		if bound, err = strconv.Atoi(v); err != nil || bound < 0 {
			t.Fatalf("BENCH_MAX_WORKER_PODS=%q: want a count, 0 for none", v)
		}
		maxPods = ", maxWorkerPods: " + v
	}

	// The limit: a bare client creating the same pods with 16 workers, at
	// most bound unfinished, and the time it sees them all Succeeded (KWOK
	// finishing them) through a watch: the manager cannot end a run
	// earlier.
	var slots chan struct{}
	if bound > 0 && bound < n {
		slots = make(chan struct{}, bound)
	}
	bareWatch := watchPods(t, cs, "bare")
	start := time.Now()
	bareDone := make(chan time.Duration, 1)
	// Closed when the watch stops counting: if it gave up, no slot is
	// freed again, and the creators still waiting for one stop instead of
	// hanging until go test's timeout.
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		bareDone <- waitSucceeded(t, bareWatch, n, start, func() {
			if slots != nil {
				<-slots
			}
		})
	}()
	parallel.For(16, n, func(i int) {
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-counted:
				return
			}
		}
		if err := c.Create(ctx, s.barePod(t, "bare", i)); err != nil {
			t.Error(err)
		}
	})
	bare := time.Since(start)
	bareSucceeded := <-bareDone
	if bareSucceeded == 0 {
		t.FailNow()
	}
	s.clearBare(t, n)

	// The manager: ImageList → all pods created → job Completed → pods
	// deleted (delayOnSuccess 0s, keepReportFor 0s: cleanup is measured).
	m, stopManager := s.startManager(t, "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 0s, keepReportFor: 0s}"+maxPods+"}}\n",
		os.Getenv("BENCH_PPROF") != "")
	defer stopManager()
	metricsAddr, pprofAddr, mgr := m.metricsAddr, m.pprofAddr, m.Cmd
	time.Sleep(3 * time.Second) // caches synced
	// The reference index lists every pod and template before the first
	// wave: measured from here once the manager's CPU has settled.
	indexSynced := settleCPU(t, mgr.Process.Pid, 10*time.Minute)
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
	records := watchRecords(t, cs, "eraser-system")
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
	var list eraserv1.ImageList
	for time.Since(start) < 15*time.Minute {
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
	records.addObject(t, c, "ImageList", &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: "bench"}})
	records.addObject(t, c, "ImageJob", &eraserv1.ImageJob{ObjectMeta: metav1.ObjectMeta{Name: list.Status.Job}})
	// Cleanup: the job's pods go (delayOnSuccess 0s) in pages that the
	// API server answers in time, once the report collector has given up
	// on KWOK's nodes, which serve no logs: at 10,000 nodes that can take
	// minutes (its failed reads time out), hence the long deadline. Polled (metadata only, once a second): a
	// watch held this long may be ended by the server.
	w.Stop()
	// The pods wait for the report collector (their logs are its only
	// source): timed apart, so that cleanup splits into that wait and the
	// deletion.
	reportDone := make(chan time.Duration, 1)
	go func() { reportDone <- waitReportComplete(ctx, c, list.Status.Job, start) }()
	s.waitNoPods(t, "eraser-system", 20*time.Minute)
	cleanup := time.Since(start) - completed
	reportComplete := <-reportDone
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
		"nodes": n, "maxWorkerPods": bound, "hugeReference": hugeReference(), "bareSeconds": bare.Seconds(), "bareSucceededSeconds": bareSucceeded.Seconds(),
		"fanoutSeconds": fanout.Seconds(), "fanoutRatio": fanout.Seconds() / bare.Seconds(),
		"lastPodSucceededSeconds": lastSucceeded.Seconds(),
		"completedSeconds":        completed.Seconds(), "completedRatio": completed.Seconds() / bareSucceeded.Seconds(),
		"completedAfterLastPodSeconds":        (completed - lastSucceeded).Seconds(),
		"cleanupSeconds":                      cleanup.Seconds(),
		"reportCompleteAfterCompletedSeconds": (reportComplete - completed).Seconds(),
		"writesPerNode":                       float64(writes) / float64(n), "readsPerNode": float64(reads) / float64(n), "peakRssMiB": rss, "peakRssSyncedMiB": rssSynced,
		"firstPodSeconds":     firstPod.Seconds(),
		"managerCpuMsPerNode": cpu * 1000 / float64(n),
		"loadBefore":          loadBefore, "loadAfter": loadAvg(),
		"workloadPods": s.n * s.perNode, "workloadTemplates": s.templates,
		"workloadCreateSeconds": workloadCreate.Seconds(), "managerSettledSeconds": indexSynced.Seconds(),
		"kwokIdleShare": s.kwokIdle,
	}
	maps.Copy(row, records.row(n))
	for name, v := range shares {
		row["cpuShare_"+name] = (v - sharesBefore[name]) / run
	}
	row["cpuShare_manager"] = cpu / run
	return row
}
