//go:build bench

package workloadindex

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/eraser-oss/eraser/internal/testing/benchworkload"
	"github.com/eraser-oss/eraser/internal/util/parallel"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// TestIndexAtFullSize measures the index at the size the sets are meant
// for (BENCH_INDEX_NODES nodes, 10,000, with BENCH_INDEX_PODS pods each,
// 110, and BENCH_INDEX_TEMPLATES templates, 50,000) without an API server:
// 1.1 M pods take over an hour to create in one, where what is sized here
// (the index's heap, a wave's sets and what they weigh) does not depend on
// how the objects arrived. The objects are those make bench-references
// creates (internal/testing/benchworkload), so that the two benchmarks' figures can
// be set side by side at the same size.
//
// Every kind is first synced empty, then each object is built, handed to
// its store's Add as a watch event would be, and dropped. The sync path
// (a kind's set built as the stream arrives, swapped in by Replace) puts
// the same entries into the same maps and slices.
//
//	make bench-index
func TestIndexAtFullSize(t *testing.T) {
	nodes, perNode, templates := sizeEnv(t, "BENCH_INDEX_NODES", 10000), sizeEnv(t, "BENCH_INDEX_PODS", 110), sizeEnv(t, "BENCH_INDEX_TEMPLATES", 50000)
	pods := nodes * perNode

	runtime.GC()
	debug.FreeOSMemory()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	idx := newIndex()
	var stores [numKinds]*store
	for k := range numKinds {
		stores[k] = &store{idx: idx, kind: k}
		if err := stores[k].Replace(nil, "1"); err != nil {
			t.Fatal(err)
		}
	}
	if !idx.Synced() {
		t.Fatal("not synced after every kind's empty list")
	}
	start := time.Now()
	for n := range templates {
		obj, _ := benchworkload.Template(n)
		if err := stores[templateKind(obj)].Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for n := range pods {
		if err := stores[kindPod].Add(benchworkload.Pod(n, benchworkload.Node(n/perNode), templates, true)); err != nil {
			t.Fatal(err)
		}
	}
	ingest := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))

	st := idx.Stats()
	wantHeld, wantClusterRefs := benchworkload.ExpectedTemplates(templates)
	if st.BoundPods != pods || st.Nodes != nodes || st.UnboundPods != 0 || st.Templates != wantHeld {
		t.Fatalf("index holds %d pods on %d nodes, %d unbound, %d templates; want %d on %d, 0, %d",
			st.BoundPods, st.Nodes, st.UnboundPods, st.Templates, pods, nodes, wantHeld)
	}
	row := map[string]any{
		"nodes": nodes, "podsPerNode": perNode, "pods": pods, "templates": templates, "templatesHeld": st.Templates,
		"ingestSeconds": ingest.Seconds(), "ingestMicrosPerObject": float64(ingest.Microseconds()) / float64(pods+templates),
		"indexHeapMiB": heap / (1 << 20), "indexHeapBytesPod": heap / float64(pods),
		"ingestPath": "store.Replace(nil) per kind (synced empty), then store.Add per object",
		"gomaxprocs": runtime.GOMAXPROCS(0), "loadavg": loadavg(),
	}

	s := time.Now()
	refs, ok := idx.Cluster()
	row["clusterFirstBuildMs"] = msSince(s)
	if !ok || len(refs) != wantClusterRefs {
		t.Fatalf("Cluster() = %d refs, ok %v; want %d, true", len(refs), ok, wantClusterRefs)
	}
	fullWaves(t, idx, stores[kindDeployment], nodes, wantClusterRefs, row)
	runtime.KeepAlive(idx)

	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range row {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Logf("%-26s %v", k, row[k])
	}
	writeIndexResults(t, fmt.Sprintf("nodes%d-pods%d-templates%d", nodes, perNode, templates), row)
}

// fullWaves measures what three waves ask of the index, each after a
// template change (so that Cluster() builds its set again), as
// bench-references does, and what each writes.
func fullWaves(t *testing.T, idx *Index, deployments *store, nodes, wantClusterRefs int, row map[string]any) {
	var build, cached, encode, nodeSeq, node16 []float64
	for wave := range 3 {
		// Template 0 is a Deployment; its app is template 1's as well, so
		// the set gains the new image and loses none.
		obj, _ := benchworkload.Template(0)
		d := obj.(*appsv1.Deployment)
		d.Spec.Template.Spec.Containers[0].Image = benchworkload.AppImage(1000000 + wave)
		if err := deployments.Update(d); err != nil {
			t.Fatal(err)
		}
		if idx.Stats().ClusterCached {
			t.Fatal("the cluster set is still cached after a template changed")
		}
		s := time.Now()
		refs, ok := idx.Cluster()
		build = append(build, msSince(s))
		if !ok || len(refs) != wantClusterRefs+1 {
			t.Fatalf("wave %d: Cluster() = %d refs, ok %v; want %d", wave, len(refs), ok, wantClusterRefs+1)
		}
		s = time.Now()
		_, _ = idx.Cluster()
		cached = append(cached, msSince(s))
		s = time.Now()
		_, parts, err := references.EncodeCluster(refs, 0)
		encode = append(encode, msSince(s))
		if err != nil {
			t.Fatal(err)
		}
		partBytes, partMax := 0, 0
		for _, p := range parts {
			partBytes, partMax = partBytes+len(p), max(partMax, len(p))
		}

		s = time.Now()
		for n := range nodes {
			_ = idx.Node(benchworkload.Node(n))
		}
		nodeSeq = append(nodeSeq, msSince(s))
		var sum, most, incomplete, empty atomic.Int64
		s = time.Now()
		parallel.For(16, nodes, func(n int) {
			r := idx.Node(benchworkload.Node(n))
			if len(r) == 0 {
				empty.Add(1)
			}
			v := references.EncodeNode(r)
			sum.Add(int64(len(v)))
			if v == references.Incomplete {
				incomplete.Add(1)
			}
			for m := most.Load(); int64(len(v)) > m && !most.CompareAndSwap(m, int64(len(v))); m = most.Load() {
			}
		})
		node16 = append(node16, msSince(s))
		if empty.Load() != 0 {
			t.Fatalf("wave %d: %d of %d nodes have no set", wave, empty.Load(), nodes)
		}
		row["clusterRefs"], row["clusterParts"], row["clusterPartsBytes"], row["clusterPartMaxBytes"] = len(refs), len(parts), partBytes, partMax
		row["nodeSetsBytes"], row["nodeSetAvgBytes"], row["nodeSetMaxBytes"], row["nodeSetsIncomplete"] =
			sum.Load(), float64(sum.Load())/float64(nodes), most.Load(), incomplete.Load()
		row["waveBytesWritten"] = sum.Load() + int64(partBytes)
	}
	row["clusterBuildMs"], row["clusterCachedMs"], row["encodeClusterMs"] = build, cached, encode
	row["nodeAllSequentialMs"], row["nodeAllEncoded16Ms"] = nodeSeq, node16
}

// templateKind is the index's kind of a benchworkload template.
func templateKind(obj any) kind {
	switch obj.(type) {
	case *appsv1.Deployment:
		return kindDeployment
	case *appsv1.ReplicaSet:
		return kindReplicaSet
	case *appsv1.StatefulSet:
		return kindStatefulSet
	case *appsv1.DaemonSet:
		return kindDaemonSet
	case *batchv1.Job:
		return kindJob
	}
	return kindCronJob
}

func sizeEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func msSince(s time.Time) float64 { return float64(time.Since(s).Microseconds()) / 1000 }

// loadavg is the machine's load when the figures were taken: the times
// are upper bounds on a shared machine.
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// writeIndexResults records the figures under key (the sizes) in
// bench/results/index-full.json, keeping the other sizes' figures, as
// test/bench's writeResults keeps other keys.
func writeIndexResults(t *testing.T, key string, row map[string]any) {
	dir := filepath.Join("..", "..", "..", "bench", "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "index-full.json")
	doc := map[string]any{}
	if data, err := os.ReadFile(file); err == nil {
		// A file that does not decode is replaced.
		_ = json.Unmarshal(data, &doc)
	}
	row["date"] = time.Now().UTC().Format(time.RFC3339)
	doc[key] = row
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("written to bench/results/index-full.json (%s)", key)
}
