//go:build linux && bench

package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/eraser-oss/eraser/internal/manager/workloadindex"
	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// TestReferencesBench measures the manager's reference index on a real API
// server holding a large cluster's objects: BENCH_REF_NODES nodes (10,000)
// with BENCH_REF_PODS pods each (30), bound and Pending or Running with
// their images' digests in their status (BENCH_REF_RUNNING=0 leaves them
// Pending), and BENCH_REF_TEMPLATES workload templates (20,000). Nodes are
// plain Node objects and nothing runs: the index reads only the API.
//
// Figures: the index's sync time, its Go heap and the process's peak RSS
// while syncing, the time of a wave's sets (Cluster() built and cached,
// Node() for every node, one goroutine and 16 as the pod builders call it),
// the size of what a wave writes (the cluster set's gzip parts, the node
// sets' annotations), and the manager binary's peak RSS on the same
// cluster once its index has synced (BENCH_REF_MANAGER=0 skips it).
//
//	make bench-references
func TestReferencesBench(t *testing.T) {
	nodes, perNode, templates := envInt("BENCH_REF_NODES", 10000), envInt("BENCH_REF_PODS", 30), envInt("BENCH_REF_TEMPLATES", 20000)
	running := os.Getenv("BENCH_REF_RUNNING") != "0"
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	cs := fastClient(t, env)
	ctx := context.Background()

	start := time.Now()
	objs := createCluster(t, ctx, cs, nodes, perNode, templates, running)
	created := time.Since(start)
	t.Logf("created %d nodes, %d pods (running: %v) and %d templates in %.0fs", nodes, nodes*perNode, running, templates, created.Seconds())

	// The index in this process, measured from a clean heap.
	runtime.GC()
	debug.FreeOSMemory()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := vmRSS(os.Getpid())
	resetPeakRSS(t)
	idx, err := workloadindex.New(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ictx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = idx.Start(ictx) }()
	defer func() { cancel(); <-done }()
	start = time.Now()
	testenv.WaitFor(t, 10*time.Minute, "the index to sync", idx.Synced)
	synced := time.Since(start)
	peakSync := peakRSS(os.Getpid())
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := idx.Stats()
	if st.BoundPods != nodes*perNode || st.Nodes != nodes {
		t.Errorf("index holds %d pods on %d nodes, want %d on %d", st.BoundPods, st.Nodes, nodes*perNode, nodes)
	}

	row := map[string]any{
		"nodes": nodes, "podsPerNode": perNode, "pods": nodes * perNode, "running": running, "templates": templates,
		"templatesHeld": st.Templates, "objects": objs, "createSeconds": created.Seconds(),
		"syncSeconds": synced.Seconds(), "streams": st.Streams, "lists": st.Lists,
		"indexHeapMiB":        float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20),
		"indexHeapBytesPod":   float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(nodes*perNode),
		"processRssBeforeMiB": rssBefore, "processPeakRssSyncMiB": peakSync,
	}
	measureWave(t, cs, idx, nodes, row)
	if os.Getenv("BENCH_REF_MANAGER") != "0" {
		managerRSS(t, env, row)
	}
	fmt.Printf("\n%-28s %v\n", "figure", "value")
	for _, k := range sortedKeys(row) {
		fmt.Printf("%-28s %v\n", k, row[k])
	}
	writeResults(t, "references", "index", row)
}

// measureWave times what one wave asks of the index and sizes what it
// writes, three times.
func measureWave(t *testing.T, cs kubernetes.Interface, idx *workloadindex.Index, nodes int, row map[string]any) {
	var clusterBuild, clusterCached, encodeCluster, nodeSeq, node16 []float64
	for wave := range 3 {
		// A template changes before each wave: its Cluster() builds the set.
		_, _ = idx.Cluster()
		changeTemplate(t, cs, wave)
		testenv.WaitFor(t, time.Minute, "the cluster's set to be dropped", func() bool { return !idx.Stats().ClusterCached })
		s := time.Now()
		refs, ok := idx.Cluster()
		clusterBuild = append(clusterBuild, since(s))
		if !ok {
			t.Fatal("the index is not synced")
		}
		s = time.Now()
		_, _ = idx.Cluster()
		clusterCached = append(clusterCached, since(s))
		s = time.Now()
		set, parts, err := references.EncodeCluster(refs, 0)
		encodeCluster = append(encodeCluster, since(s))
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, p := range parts {
			total += len(p)
		}
		row["clusterRefs"], row["clusterParts"], row["clusterPartsBytes"], row["clusterSet"] = len(refs), len(parts), total, set

		var sum, most, incomplete atomic.Int64
		s = time.Now()
		for n := range nodes {
			_ = idx.Node(benchworkload.Node(n))
		}
		nodeSeq = append(nodeSeq, since(s))
		s = time.Now()
		parallel.For(16, nodes, func(n int) {
			v := references.EncodeNode(idx.Node(benchworkload.Node(n)))
			sum.Add(int64(len(v)))
			if v == references.Incomplete {
				incomplete.Add(1)
			}
			for m := most.Load(); int64(len(v)) > m && !most.CompareAndSwap(m, int64(len(v))); m = most.Load() {
			}
		})
		node16 = append(node16, since(s))
		row["nodeSetsBytes"], row["nodeSetMaxBytes"], row["nodeSetsIncomplete"] = sum.Load(), most.Load(), incomplete.Load()
	}
	row["clusterBuildMs"], row["clusterCachedMs"], row["encodeClusterMs"] = clusterBuild, clusterCached, encodeCluster
	row["nodeAllSequentialMs"], row["nodeAllEncoded16Ms"] = nodeSeq, node16
}

// changeTemplate moves template 0 (a Deployment) to another image.
func changeTemplate(t *testing.T, cs kubernetes.Interface, wave int) {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"c0","image":%q}]}}}}`, benchworkload.AppImage(1000000+wave))
	if _, err := cs.AppsV1().Deployments("team-000").Patch(context.Background(), "w-00000", types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func since(s time.Time) float64 { return float64(time.Since(s).Microseconds()) / 1000 }

// managerRSS runs the manager binary on the cluster and reads its peak RSS
// once its CPU use has settled: the index synced, nothing else to do.
func managerRSS(t *testing.T, env *testenv.Env, row map[string]any) {
	s := &simCluster{env: env}
	m, stop := s.startManager(t, "apiVersion: eraser.sh/v1alpha3\n", false)
	defer stop()
	start := time.Now()
	last, quiet := 0.0, 0
	for quiet < 3 && time.Since(start) < 10*time.Minute {
		time.Sleep(2 * time.Second)
		if m.Exited() {
			t.Errorf("the manager exited after %.0fs", time.Since(start).Seconds())
			return
		}
		cpu := processCPU(m.pid())
		if cpu > 0 && cpu-last < 0.05 {
			quiet++
		} else {
			quiet = 0
		}
		last = cpu
	}
	row["managerSettledSeconds"], row["managerCpuSeconds"] = time.Since(start).Seconds()-6, last
	row["managerPeakRssMiB"], row["managerRssMiB"] = peakRSS(m.pid()), vmRSS(m.pid())
}

// createCluster creates the namespaces, nodes, templates and pods, 48 at a
// time, and returns how many objects it created.
func createCluster(t *testing.T, ctx context.Context, cs kubernetes.Interface, nodes, perNode, templates int, running bool) int {
	var n atomic.Int64
	fail := func(err error) {
		if err != nil {
			t.Error(err)
		} else {
			n.Add(1)
		}
	}
	for _, ns := range append(benchworkload.Namespaces(), "eraser-system") {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		fail(err)
	}
	parallel.For(48, nodes, func(i int) {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchworkload.Node(i)}}, metav1.CreateOptions{})
		fail(err)
	})
	parallel.For(48, templates, func(i int) { fail(createTemplate(ctx, cs, i)) })
	var once sync.Once
	progress := time.Now()
	parallel.For(48, nodes*perNode, func(i int) {
		fail(createPod(ctx, cs, i, benchworkload.Node(i/perNode), templates, running))
		if i%50000 == 0 && i > 0 {
			once.Do(func() { t.Logf("%d pods in %.0fs", i, time.Since(progress).Seconds()) })
		}
	})
	return int(n.Load())
}
