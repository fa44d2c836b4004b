package cacheopts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// TestStoresReadTheInformers: the Stores answer from the very informers the
// cache builds (through Options' NewInformer), follow their changes, and
// refuse to answer before they have synced.
func TestStoresReadTheInformers(t *testing.T) {
	_, stores := Options("eraser-system")
	if _, err := stores.JobPods("a"); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("JobPods before any informer: %v, want ErrNotSynced", err)
	}
	if _, err := stores.NodeExists("n1"); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("NodeExists before any informer: %v, want ErrNotSynced", err)
	}

	pods, nodes := fcache.NewFakeControllerSource(), fcache.NewFakeControllerSource()
	pod := func(name, job string) *corev1.Pod {
		p := builder.MakePod(name, name+"-node", time.Now()).Obj()
		p.Namespace = "eraser-system"
		if job != "" {
			p.Labels = map[string]string{podspec.LabelJob: job}
		}
		return p
	}
	pods.Add(pod("a1", "a"))
	pods.Add(pod("a2", "a"))
	pods.Add(pod("b1", "b"))
	pods.Add(pod("other", ""))
	done := pod("c1", "c")
	done.Spec.NodeName, done.Status.Phase = "b1-node", corev1.PodSucceeded
	pods.Add(done)
	nodes.Add(builder.MakeNode("n1").Obj())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// As controller-runtime calls it: its own namespace index given.
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for _, inf := range []toolscache.SharedIndexInformer{
		stores.newInformer(pods, &corev1.Pod{}, 0, indexers),
		stores.newInformer(nodes, &corev1.Node{}, 0, indexers),
	} {
		go inf.RunWithContext(ctx)
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
	}
	if _, ok := indexers[indexJob]; ok {
		t.Error("the caller's indexers were modified")
	}

	names := func(job string) []string {
		t.Helper()
		ps, err := stores.JobPods(job)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	if diff := cmp.Diff([]string{"a1", "a2"}, names("a")); diff != "" {
		t.Errorf("job a's pods (-want +got):\n%s", diff)
	}
	if got := names("none"); len(got) != 0 {
		t.Errorf("a job without pods: %v", got)
	}
	busy := func(node string) []string {
		t.Helper()
		ps, err := stores.BusyOn(node)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	// A finished pod does not hold its node; a pod without a job label is
	// not a worker.
	if diff := cmp.Diff(map[string][]string{"a1-node": {"a1"}, "b1-node": {"b1"}, "other-node": nil},
		map[string][]string{"a1-node": busy("a1-node"), "b1-node": busy("b1-node"), "other-node": busy("other-node")}); diff != "" {
		t.Errorf("busy nodes (-want +got):\n%s", diff)
	}
	if n, err := stores.Busy(); err != nil || n != 3 {
		t.Errorf("Busy() = %d, %v; want 3 (a1, a2, b1)", n, err)
	}
	if ok, err := stores.NodeExists("n1"); err != nil || !ok {
		t.Errorf("NodeExists(n1) = %v, %v", ok, err)
	}
	if ok, err := stores.NodeExists("n2"); err != nil || ok {
		t.Errorf("NodeExists(n2) = %v, %v", ok, err)
	}

	pods.Delete(pod("a1", "a"))
	nodes.Delete(builder.MakeNode("n1").Obj())
	wait.ForDetail(t, time.Minute, "the deletions to be seen", func() (bool, string) {
		exists, err := stores.NodeExists("n1")
		if err != nil {
			t.Fatal(err)
		}
		n, err := stores.Busy()
		if err != nil {
			t.Fatal(err)
		}
		return !exists && slices.Equal(names("a"), []string{"a2"}) && n == 2 && len(busy("a1-node")) == 0,
			fmt.Sprintf("job a %v, node n1 exists %v", names("a"), exists)
	})
}
