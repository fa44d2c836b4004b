//go:build bench

package refindex

import (
	"crypto/sha256"
	"encoding/hex"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/eraser-oss/eraser/internal/parallel"
	"github.com/eraser-oss/eraser/internal/references"
)

// TestIndexAtFullSize measures the index at the size the sets are meant
// for (BENCH_INDEX_NODES nodes, 10,000, with BENCH_INDEX_PODS pods each,
// 110, and BENCH_INDEX_TEMPLATES templates, 50,000) without an API server:
// 1.1 M pods take over an hour to create in one, where what is sized here
// (the index's heap, a wave's sets and what they weigh) does not depend on
// how the objects arrived. The objects are those of make bench-references
// (test/bench/references_objects_test.go), so that the two benchmarks'
// figures can be set side by side at the same size.
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
		k, obj := fullTemplate(n)
		if err := stores[k].Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	for n := range pods {
		if err := stores[kindPod].Add(fullPod(n, fullNode(n/perNode), templates)); err != nil {
			t.Fatal(err)
		}
	}
	ingest := time.Since(start)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	heap := float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))

	st := idx.Stats()
	wantHeld, wantClusterRefs := expectedTemplates(templates)
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
		_, obj := fullTemplate(0)
		d := obj.(*appsv1.Deployment)
		d.Spec.Template.Spec.Containers[0].Image = fullAppImage(1000000 + wave)
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
			_ = idx.Node(fullNode(n))
		}
		nodeSeq = append(nodeSeq, msSince(s))
		var sum, most, incomplete, empty atomic.Int64
		s = time.Now()
		parallel.For(16, nodes, func(n int) {
			r := idx.Node(fullNode(n))
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

// The objects, shaped as bench-references creates them: 100 teams, an app
// image per two templates, a mesh sidecar and init image in every pod, a
// Running pod's status naming each image and its digest.

const (
	fullSidecar  = "registry.example.com/mesh/proxy:1.24.3"
	fullMeshInit = "registry.example.com/mesh/init:1.24.3"
	fullTeams    = 100
)

func fullNode(n int) string { return fmt.Sprintf("node-%05d", n) }

func fullAppImage(a int) string {
	return fmt.Sprintf("registry.example.com/team-%03d/app-%05d:1.%d.%d", a%fullTeams, a, a%7, a%13)
}

// fullDigest is the imageID a node would report: "<repo>@sha256:<hex>".
func fullDigest(image string) string {
	sum := sha256.Sum256([]byte(image))
	slash := strings.LastIndexByte(image, '/')
	repo, _, _ := strings.Cut(image[slash+1:], ":")
	return image[:slash+1] + repo + "@sha256:" + hex.EncodeToString(sum[:])
}

func fullPodSpec(images ...string) corev1.PodSpec {
	spec := corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init", Image: fullMeshInit}}}
	for i, img := range images {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: img})
	}
	return spec
}

// templateKind is template n's kind, and for a ReplicaSet whether it is
// at zero: of every 20, 8 Deployments, 8 ReplicaSets (every other one at
// zero), a StatefulSet, a DaemonSet, a Job, a CronJob.
func templateKind(n int) (k kind, zero bool) {
	switch m := n % 20; {
	case m < 8:
		return kindDeployment, false
	case m < 16:
		return kindReplicaSet, n%2 == 0
	case m == 16:
		return kindStatefulSet, false
	case m == 17:
		return kindDaemonSet, false
	case m == 18:
		return kindJob, false
	}
	return kindCronJob, false
}

// expectedTemplates is how many of n templates the index holds (not the
// ReplicaSets at zero) and how many images their cluster set names: each
// app's image, the sidecar and the init image.
func expectedTemplates(n int) (held, refs int) {
	apps := map[int]bool{}
	for i := range n {
		if _, zero := templateKind(i); !zero {
			held++
			apps[i/2] = true
		}
	}
	return held, len(apps) + 2
}

// fullTemplate is template n, running app n/2: a Deployment and its
// ReplicaSet share their images.
func fullTemplate(n int) (kind, any) {
	name := fmt.Sprintf("w-%05d", n)
	meta := metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%03d", n%fullTeams), Name: name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: fullPodSpec(fullAppImage(n/2), fullSidecar)}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	k, zero := templateKind(n)
	switch k {
	case kindDeployment:
		return k, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(n % 4)), Selector: sel, Template: tpl}}
	case kindReplicaSet:
		replicas := int32(1)
		if zero {
			replicas = 0
		}
		return k, &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: sel, Template: tpl}}
	case kindStatefulSet:
		return k, &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(1)), Selector: sel, Template: tpl}}
	case kindDaemonSet:
		return k, &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}
	case kindJob:
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		return k, &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tpl}}
	}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	return k, &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 * * * *", Suspend: ptr.To(n%40 == 19),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}
}

// fullPod is pod n on node, of app n modulo the templates' apps (an app's
// pods spread over the nodes), Running, every container's image and digest
// in its status. Its strings are its own, as a decoded pod's are.
func fullPod(n int, node string, templates int) *corev1.Pod {
	app := n % max(1, templates/2)
	ns := fmt.Sprintf("team-%03d", app%fullTeams)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%05d-%06d", app, n),
		Labels: map[string]string{"bench.eraser.sh/workload": "true"}},
		Spec: fullPodSpec(fullAppImage(app), fullSidecar)}
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses,
			corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: fullDigest(c.Image)})
	}
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses,
			corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: fullDigest(c.Image), Ready: true})
	}
	return p
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
	dir := filepath.Join("..", "..", "bench", "results")
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
