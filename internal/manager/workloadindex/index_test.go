package workloadindex

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/wire/references"
)

// synced is an index whose kinds have all been listed (empty), with
// objects then added through the stores as watch events add them.
func synced(t *testing.T, objs ...any) *Index {
	t.Helper()
	i := newIndex()
	for k := range numKinds {
		if err := (&store{idx: i, kind: k}).Replace(nil, "1"); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		add(t, i, o)
	}
	return i
}

func kindOf(obj any) kind {
	switch obj.(type) {
	case *corev1.Pod:
		return kindPod
	}
	for k := kindDeployment; k < numKinds; k++ {
		if fmt.Sprintf("%T", obj) == fmt.Sprintf("*v1.%s", k) {
			return k
		}
	}
	panic(fmt.Sprintf("no kind for %T", obj))
}

func add(t *testing.T, i *Index, obj any) {
	t.Helper()
	if err := (&store{idx: i, kind: kindOf(obj)}).Update(obj); err != nil {
		t.Fatal(err)
	}
}

func del(t *testing.T, i *Index, obj any) {
	t.Helper()
	if err := (&store{idx: i, kind: kindOf(obj)}).Delete(obj); err != nil {
		t.Fatal(err)
	}
}

func refs(pairs ...string) []references.Ref {
	var out []references.Ref
	for j := 0; j < len(pairs); j += 2 {
		out = append(out, references.Ref{Image: pairs[j], Owner: pairs[j+1]})
	}
	return out
}

func TestNotSyncedUntilEveryKind(t *testing.T) {
	i := newIndex()
	for k := range numKinds {
		if _, ok := i.Cluster(); ok {
			t.Fatalf("ok before %s synced", k)
		}
		if err := (&store{idx: i, kind: k}).Replace(nil, "1"); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := i.Cluster(); !ok || len(got) != 0 {
		t.Errorf("Cluster() = %v, %v; want empty, true", got, ok)
	}
}

func TestClusterAndNode(t *testing.T) {
	i := synced(t,
		makePod("a", "web-0").node("n1").init("init:1").containers("web:1").ephemeral("debug:1").obj(),
		makePod("a", "web-1").node("n2").containers("web:1").obj(),
		makePod("a", "done").node("n1").containers("old:1").phase(corev1.PodSucceeded).obj(),
		makePod("a", "pending").containers("queued:1").obj(),
		makeDeployment("a", "web", 0, nil, "web:1"),
		makeReplicaSet("a", "web-old", 0, "web:0"),
		makeCronJob("b", "backup", true, "backup:1"),
	)
	want := refs("backup:1", "CronJob b/backup", "queued:1", "Pod a/pending", "web:1", "Deployment a/web")
	got, ok := i.Cluster()
	if diff := cmp.Diff(want, got); !ok || diff != "" {
		t.Errorf("Cluster() ok=%v (-want +got):\n%s", ok, diff)
	}
	if diff := cmp.Diff(refs("debug:1", "Pod a/web-0", "init:1", "Pod a/web-0", "web:1", "Pod a/web-0"), i.Node("n1")); diff != "" {
		t.Errorf("Node(n1) (-want +got):\n%s", diff)
	}
	if got := i.Node("n3"); len(got) != 0 {
		t.Errorf("Node(n3) = %v", got)
	}

	// The caller owns what it gets: sorting or compacting it in place (as
	// references.EncodeCluster does) leaves the cache intact.
	got[0].Image = "changed"
	if again, _ := i.Cluster(); again[0].Image != "backup:1" {
		t.Error("the cached cluster set was changed through a returned slice")
	}

	// The pending pod is scheduled, the deployment's image changes, the
	// cron job goes, a pod finishes.
	add(t, i, makePod("a", "pending").node("n2").containers("queued:1").obj())
	add(t, i, makeDeployment("a", "web", 0, nil, "web:2"))
	del(t, i, makeCronJob("b", "backup", true, "backup:1"))
	add(t, i, makePod("a", "web-0").node("n1").init("init:1").containers("web:1").ephemeral("debug:1").phase(corev1.PodFailed).obj())
	got, _ = i.Cluster()
	if diff := cmp.Diff(refs("web:2", "Deployment a/web"), got); diff != "" {
		t.Errorf("Cluster() after the changes (-want +got):\n%s", diff)
	}
	if got := i.Node("n1"); len(got) != 0 {
		t.Errorf("Node(n1) after its pod finished = %v", got)
	}
	if diff := cmp.Diff(refs("queued:1", "Pod a/pending", "web:1", "Pod a/web-1"), i.Node("n2")); diff != "" {
		t.Errorf("Node(n2) (-want +got):\n%s", diff)
	}
	if s := i.Stats(); s.Nodes != 1 || s.BoundPods != 2 || s.UnboundPods != 0 || s.Templates != 1 {
		t.Errorf("Stats() = %+v", s)
	}
}

// A status update that leaves the images as they were keeps the cached
// cluster set; one that changes them does not.
func TestClusterCache(t *testing.T) {
	d := makeDeployment("a", "web", 3, nil, "web:1")
	i := synced(t, d)
	if _, ok := i.Cluster(); !ok || !i.fresh {
		t.Fatal("not cached after Cluster()")
	}
	d.Status.Replicas = 3
	add(t, i, d)
	if !i.fresh {
		t.Error("a status update invalidated the cluster set")
	}
	add(t, i, makePod("a", "web-x").node("n1").containers("web:1").obj())
	if !i.fresh {
		t.Error("a bound pod invalidated the cluster set")
	}
	add(t, i, makeDeployment("a", "web", 3, nil, "web:2"))
	if i.fresh {
		t.Error("an image change left the cluster set cached")
	}
}

// A relist replaces what a kind held.
func TestReplace(t *testing.T) {
	i := synced(t, makePod("a", "gone").node("n1").containers("x").obj(), makeDaemonSet("a", "gone", "y"))
	pods := []any{makePod("a", "new").node("n2").containers("z").obj()}
	if err := (&store{idx: i, kind: kindPod}).Replace(pods, "2"); err != nil {
		t.Fatal(err)
	}
	if err := (&store{idx: i, kind: kindDaemonSet}).Replace(nil, "2"); err != nil {
		t.Fatal(err)
	}
	if got := i.Node("n1"); len(got) != 0 {
		t.Errorf("Node(n1) after the relist = %v", got)
	}
	if diff := cmp.Diff(refs("z", "Pod a/new"), i.Node("n2")); diff != "" {
		t.Errorf("Node(n2) (-want +got):\n%s", diff)
	}
	if got, _ := i.Cluster(); len(got) != 0 {
		t.Errorf("Cluster() after the relist = %v", got)
	}
}

// Readers and writers at once, as 16 pod builders and the reflectors run
// (go test -race).
func TestConcurrent(t *testing.T) {
	i := synced(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for j := range 500 {
				p := makePod("a", fmt.Sprintf("p-%d-%d", w, j)).node(fmt.Sprintf("n%d", j%10)).containers("img").obj()
				add(t, i, p)
				add(t, i, makeDeployment("a", fmt.Sprintf("d-%d", j%7), 1, nil, fmt.Sprintf("i-%d", j)))
				if j%3 == 0 {
					del(t, i, p)
				}
			}
		})
	}
	for r := range 16 {
		wg.Go(func() {
			for j := range 200 {
				_ = i.Node(fmt.Sprintf("n%d", (r+j)%10))
				if got, _ := i.Cluster(); len(got) > 0 {
					references.Dedupe(got)
				}
			}
		})
	}
	wg.Wait()
	if s := i.Stats(); s.BoundPods != 4*(500-167) {
		t.Errorf("bound pods = %d, want %d", s.BoundPods, 4*(500-167))
	}
}
