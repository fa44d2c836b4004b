//go:build linux && bench

package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

// TestManagerBenchQueue measures runs that share the nodes (one worker per
// node, cluster-wide): BENCH_QUEUE_RUNS ImageLists (10) created at once on
// BENCH_QUEUE_NODES KWOK nodes (1,000; BENCH_QUEUE_MAX_WORKER_PODS sets
// manager.imageJob.maxWorkerPods, default 1000), against the same runs one after
// the other and against a bare client creating the same pods, one per node
// at a time, each node's next pod as soon as its previous one finished.
// make bench-manager runs it after TestManagerBench; alone:
//
//	go test -tags bench -count=1 -run TestManagerBenchQueue -v ./test/bench
func TestManagerBenchQueue(t *testing.T) {
	n, runs := envInt("BENCH_QUEUE_NODES", 1000), envInt("BENCH_QUEUE_RUNS", 10)
	if n <= 0 || runs <= 0 {
		t.Skip("BENCH_QUEUE_NODES or BENCH_QUEUE_RUNS is 0")
	}
	kwok := buildKwok(t)
	s, stop := startCluster(t, kwok, n)
	defer stop()
	// The API server's metrics, read in JSON.
	admin, err := kubernetes.NewForConfig(s.env.Config)
	if err != nil {
		t.Fatal(err)
	}

	bare := queueBare(t, s, runs)
	s.clearBare(t, n*runs)
	queued := queueManager(t, s, admin, "queued", runs, true)
	sequential := queueManager(t, s, admin, "sequential", runs, false)

	q, sq, b := queued["seconds"].(float64), sequential["seconds"].(float64), bare["seconds"].(float64)
	oneRun := median1(sequential["runSeconds"].([]float64))
	bound := "default (1000)"
	if v := os.Getenv("BENCH_QUEUE_MAX_WORKER_PODS"); v != "" {
		bound = v
	}
	res := map[string]any{"nodes": n, "runs": runs, "maxWorkerPods": bound,
		"bare": bare, "queued": queued, "sequential": sequential,
		"queuedOverSequential": q / sq, "queuedOverBare": q / b, "sequentialOverBare": sq / b,
		"medianSingleRunSeconds": oneRun, "queuedOverSingleRun": q / oneRun}
	fmt.Printf("\n%d ImageLists on %d nodes (one worker per node, maxWorkerPods %s)\n", runs, n, bound)
	fmt.Printf("%-11s %10s %7s %6s %6s %8s %9s %9s %9s %9s %6s %8s %8s %8s  %s\n", "", "ALL DONE s", "PODS/s", "PEAK", "/NODE",
		"FIRST s", "CLEANUP s", "JOB ST/nr", "LIST ST/r", "WR/nr", "CONFL", "RSS MiB", "(SYNCED)", "CPU ms/p", "CPU SHARES (cores)")
	for _, r := range []map[string]any{bare, queued, sequential} {
		fmt.Printf("%-11s %10s %7s %6s %6s %8s %9s %9s %9s %9s %6s %8s %8s %8s  apiserver %s etcd %s kwok %s manager %s (load %s -> %s)\n",
			r["phase"], cell(r, "seconds", "%.2f"), cell(r, "podsPerSecond", "%.1f"), cell(r, "peakInFlight", "%v"), cell(r, "peakInFlightPerNode", "%v"),
			cell(r, "firstCompletedSeconds", "%.2f"), cell(r, "cleanupSeconds", "%.2f"), cell(r, "jobStatusWritesPerNodeRun", "%.3f"),
			cell(r, "listStatusWritesPerRun", "%.2f"), cell(r, "managerWritesPerNodeRun", "%.3f"), cell(r, "jobStatusConflicts", "%v"),
			cell(r, "peakRssMiB", "%.1f"), cell(r, "peakRssSyncedMiB", "%.1f"), cell(r, "managerCpuMsPerPod", "%.2f"),
			cell(r, "cpuShare_kube_apiserver", "%.2f"), cell(r, "cpuShare_etcd", "%.2f"), cell(r, "cpuShare_kwok", "%.2f"), cell(r, "cpuShare_manager", "%.2f"),
			r["loadBefore"], r["loadAfter"])
	}
	fmt.Printf("queued %.2fx sequential, %.2fx the bare client, %.2fx one run alone (median %.2f s)\n", q/sq, q/b, q/oneRun, oneRun)
	for _, r := range []map[string]any{queued, sequential} {
		fmt.Printf("%s: lists Completed at %s s; pods per node %v..%v; %v nodes ran a run before one ranked ahead of it (%v pairs of pods)\n",
			r["phase"], secondsList(r["completedSeconds"].([]float64)), r["podsPerNodeMin"], r["podsPerNodeMax"], r["nodesOutOfOrder"], r["podPairsOutOfOrder"])
	}
	for _, r := range []map[string]any{queued, sequential} {
		jobs := r["jobs"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(jobs)) {
			j := jobs[name].(map[string]float64)
			fmt.Printf("%s %s: pods created %.1f (first) %.1f (half) %.1f (last), succeeded %.1f (half) %.1f (last), job finished %.1f s\n",
				r["phase"], name, j["firstPod"], j["halfPods"], j["lastPod"], j["halfSucceeded"], j["lastSucceeded"], j["finished"])
		}
	}
	for _, r := range []map[string]any{bare, queued, sequential} {
		fmt.Printf("%s: a node's next pod %.2f s after its previous one finished (median; p95 %.2f s, max %.2f s)\n",
			r["phase"], r["handoffMedianSeconds"], r["handoffP95Seconds"], r["handoffMaxSeconds"])
	}
	writeResults(t, "manager", "queue", res)
}

// queueBare is the limit for runs that take every node in turn: a bare
// client (16 workers) creating each run's pod on a node as soon as the
// node's previous pod is seen Succeeded, until every run's pod on every
// node has succeeded. It creates and finishes the same pods as the manager
// and deletes none while timed (the manager's cleanup is its own figure).
func queueBare(t *testing.T, s *simCluster, runs int) map[string]any {
	n := s.n
	w := watchPods(t, s.cs, "bare")
	defer w.Stop()
	work := make(chan [2]int, n*runs)
	for i := range n {
		work <- [2]int{0, i}
	}
	start := time.Now()
	f := newFlight(start)
	shares, load := childCPU(), loadAvg()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for item := range work {
				if err := s.c.Create(context.Background(), s.barePod(t, fmt.Sprintf("bare-%02d", item[0]), item[1])); err != nil {
					t.Error(err)
				}
			}
		})
	}
	deadline := time.After(20 * time.Minute)
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for last := -1; f.succeeded < n*runs; {
		select {
		case <-tick.C:
			// A stall is said, not only timed.
			if f.succeeded == last {
				t.Logf("bare: no pod succeeded in 30 s (%d of %d succeeded, %d in flight)", f.succeeded, n*runs, f.inFlight)
			}
			last = f.succeeded
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the pod watch ended")
			}
			pod := f.observe(ev)
			if pod == nil {
				continue
			}
			run, _ := strconv.Atoi(strings.TrimPrefix(pod.Labels[podspec.LabelJob], "bare-"))
			node, _ := strconv.Atoi(strings.TrimPrefix(pod.Spec.NodeName, "node-"))
			if run+1 < runs {
				work <- [2]int{run + 1, node}
			}
		case <-deadline:
			t.Fatalf("bare: after 20 minutes %d of %d pods succeeded", f.succeeded, n*runs)
		}
	}
	took := time.Since(start)
	close(work)
	wg.Wait()
	r := f.figures()
	r["phase"], r["seconds"], r["podsPerSecond"] = "bare", took.Seconds(), float64(n*runs)/took.Seconds()
	r["loadBefore"], r["loadAfter"] = load, loadAvg()
	addShares(r, shares, took)
	return r
}

// queueManager runs the lists through a manager of its own (so that its
// peak RSS and requests are this phase's): created at once (together), or
// each once the one before is Completed. It waits for the cleanup (delay
// 0s) and deletes the lists.
func queueManager(t *testing.T, s *simCluster, admin kubernetes.Interface, phase string, runs int, together bool) map[string]any {
	ctx := context.Background()
	n := s.n
	bound := ""
	if v := os.Getenv("BENCH_QUEUE_MAX_WORKER_PODS"); v != "" {
		bound = ", maxWorkerPods: " + v
	}
	m, stopManager := s.startManager(t, "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {cleanup: {delayOnSuccess: 0s, keepReportFor: 0s}"+bound+"}}\n", false)
	defer stopManager()
	time.Sleep(3 * time.Second) // caches synced
	writesBefore := managerWrites(t, m.metricsAddr)
	apiBefore := apiServerWrites(t, admin)
	cpuBefore := processCPU(m.pid())
	rssSynced := peakRSS(m.pid())
	shares, load := childCPU(), loadAvg()

	names := make([]string, runs)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", phase, i)
	}
	w := watchPods(t, s.cs, "eraser-system")
	start := time.Now()
	f := newFlight(start)
	followed := make(chan struct{})
	go func() { defer close(followed); f.follow(w) }()
	create := func(name string) {
		if err := s.c.Create(ctx, builder.MakeImageList(name).Images("*").Obj()); err != nil {
			t.Fatal(err)
		}
	}
	done := make([]float64, runs)
	jobs := jobLog{done: map[string]float64{}, created: map[string]time.Time{}}
	if together {
		for _, name := range names {
			create(name)
		}
		waitCompleted(t, s, names, done, jobs, start, n)
	} else {
		for i, name := range names {
			create(name)
			waitCompleted(t, s, names[i:i+1], done[i:i+1], jobs, start, n)
		}
	}
	took := time.Since(start)
	s.waitNoPods(t, "eraser-system", 20*time.Minute)
	cleanup := time.Since(start) - took
	time.Sleep(2 * time.Second) // the jobs themselves are deleted after their pods
	w.Stop()
	<-followed
	api := apiServerWrites(t, admin).since(apiBefore)
	writes := managerWrites(t, m.metricsAddr) - writesBefore
	cpu := processCPU(m.pid()) - cpuBefore
	rss := peakRSS(m.pid())
	elapsed := time.Since(start)

	// Run after run: each list's own time, from its creation.
	runSeconds := slices.Clone(done)
	if !together {
		for i := len(runSeconds) - 1; i > 0; i-- {
			runSeconds[i] -= runSeconds[i-1]
		}
	}
	nr := float64(n * runs)
	r := f.figures()
	r["phase"], r["seconds"], r["podsPerSecond"] = phase, took.Seconds(), nr/took.Seconds()
	r["completedSeconds"], r["runSeconds"], r["firstCompletedSeconds"] = done, runSeconds, slices.Min(done)
	r["cleanupSeconds"] = cleanup.Seconds()
	r["nodesOutOfOrder"], r["podPairsOutOfOrder"] = f.outOfOrder(jobs.place())
	for job, at := range jobs.done {
		if j, ok := r["jobs"].(map[string]any)[job].(map[string]float64); ok {
			j["finished"] = at
		}
	}
	r["loadBefore"], r["loadAfter"] = load, loadAvg()
	r["jobStatusWrites"], r["jobStatusConflicts"] = api["imagejobs/status ok"], api["imagejobs/status conflict"]
	r["jobStatusWritesPerNodeRun"] = api["imagejobs/status ok"] / nr
	r["jobWrites"], r["listStatusWrites"] = api["imagejobs/ ok"], api["imagelists/status ok"]
	r["listStatusWritesPerRun"] = api["imagelists/status ok"] / float64(runs)
	r["managerWrites"], r["managerWritesPerNodeRun"] = writes, float64(writes)/nr
	r["apiServerWrites"] = api
	r["peakRssMiB"], r["peakRssSyncedMiB"] = rss, rssSynced
	r["managerCpuMsPerPod"] = cpu * 1000 / nr
	addShares(r, shares, elapsed)
	r["cpuShare_manager"] = cpu / elapsed.Seconds()

	for _, name := range names {
		_ = s.c.Delete(ctx, &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	time.Sleep(2 * time.Second)
	return r
}

// jobLog is what the polls saw of the jobs: when each was first seen
// finished (its phase), and when it was created.
type jobLog struct {
	done    map[string]float64
	created map[string]time.Time
}

// place is each job's place in the queue's order for these runs (all
// ImageList runs): the earlier created first, then by name.
func (l jobLog) place() map[string]int {
	names := slices.Collect(maps.Keys(l.created))
	slices.SortFunc(names, func(a, b string) int {
		if c := l.created[a].Compare(l.created[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	out := map[string]int{}
	for i, name := range names {
		out[name] = i
	}
	return out
}

// waitCompleted polls the lists until each has recorded its run, writing
// each one's time from start into done, and the jobs into log; it fails on
// a run that has not completed in 15 minutes, saying what each job waits for.
func waitCompleted(t *testing.T, s *simCluster, names []string, done []float64, log jobLog, start time.Time, n int) {
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Minute)
	left := len(names)
	for left > 0 {
		var jobs eraserv1.ImageJobList
		if err := s.c.List(ctx, &jobs); err == nil {
			for _, j := range jobs.Items {
				log.created[j.Name] = j.CreationTimestamp.Time
				if _, seen := log.done[j.Name]; !seen && (j.Status.Phase == eraserv1.PhaseCompleted || j.Status.Phase == eraserv1.PhaseFailed) {
					log.done[j.Name] = time.Since(start).Seconds()
				}
			}
		}
		for i, name := range names {
			if done[i] != 0 {
				continue
			}
			var list eraserv1.ImageList
			if err := s.c.Get(ctx, client.ObjectKey{Name: name}, &list); err != nil {
				continue
			}
			if list.Status.ObservedGeneration == list.Generation && list.Status.Timestamp != nil {
				done[i] = time.Since(start).Seconds()
				left--
				if list.Status.Success != int64(n) {
					t.Errorf("%s: %d of %d nodes succeeded (failed %d)", name, list.Status.Success, n, list.Status.Failed)
				}
			}
		}
		if left > 0 && time.Now().After(deadline) {
			var jobs eraserv1.ImageJobList
			_ = s.c.List(ctx, &jobs)
			for _, j := range jobs.Items {
				st := j.Status
				t.Logf("job %s: phase %s, started %d, succeeded %d, failed %d, waiting %d, behind %q",
					j.Name, st.Phase, st.Started, st.Succeeded, st.Failed, st.Waiting, st.QueuedBehind)
			}
			t.Fatalf("%d of %d lists not Completed after 15 minutes", left, len(names))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addShares adds the cores the control plane and KWOK used over d.
func addShares(r map[string]any, before map[string]float64, d time.Duration) {
	for name, v := range childCPU() {
		r["cpuShare_"+name] = (v - before[name]) / d.Seconds()
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func median1(v []float64) float64 {
	runs := make([]map[string]any, len(v))
	for i, x := range v {
		runs[i] = map[string]any{"v": x}
	}
	return median(runs, "v")
}

// cell formats a figure of a row, or "-" for one the row lacks.
func cell(r map[string]any, key, format string) string {
	v, ok := r[key]
	if !ok {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func secondsList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(parts, " ")
}
