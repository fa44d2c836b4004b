//go:build linux

package kubelet

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// workerDelay is how long every worker pod of TestListsTakeTurnsOnEachNode
// is unfinished at least.
//
// Why the workers are slowed down: a remover that removes one small image
// is done in well under a second once its container starts. Two ImageLists
// created together would, without the queue, each put a pod on every node
// at about the same moment, but whether the second run reaches a node while
// the first one's pod is still there would then hang on how fast the
// manager and the kubelet happen to be: the test could pass without the
// queue ever having to hold a run back. So the remover image of this test
// is the released remover with a small program in front of its entrypoint
// (testdata/delay) that waits workerDelay, then execs the remover with the
// pod's arguments: the worker does exactly what it always does, only its
// pod holds the node for workerDelay first. That is many times what the
// manager takes to create the second run's job and try its nodes (well
// under a second), so the second run certainly reaches every node while the
// first holds it, and must wait there; the test checks that it did (the
// later run's job existed before the earlier run's worker finished on the
// node) rather than assume it, and fails as meaningless otherwise.
const workerDelay = 15 * time.Second

// TestListsTakeTurnsOnEachNode installs Eraser from the chart and runs two
// ImageLists created together, each naming its own image: one worker per
// node, cluster-wide (the manager's queue) makes them take turns on each
// node.
func TestListsTakeTurnsOnEachNode(t *testing.T) {
	requireCluster(t)
	objects := installChart(t)

	t.Run("TwoListsOneWorkerPerNode", twoListsOneWorkerPerNode)

	t.Run("UninstallLeavesNothingBehind", func(t *testing.T) {
		uninstall(t, objects)
	})
}

// twoListsOneWorkerPerNode asserts, from watches of the worker pods, the
// ImageLists and the ImageJobs held for the whole run:
//   - at no moment does a node hold unfinished worker pods of both runs (the
//     watch's view, event by event), and on each node the two runs' remover
//     containers never ran at the same time (their start and finish times,
//     from the pods' status);
//   - on each node the later run existed while the earlier one's worker was
//     there (so it had to wait: the test is meaningful), and that run's
//     ImageList was seen Ready=Unknown/Queued behind the other run's job, and
//     its ImageJob with waiting nodes;
//   - both ImageLists end Ready=True (Succeeded) on every node, and both
//     images are gone from every node (none is in use).
func twoListsOneWorkerPerNode(t *testing.T) {
	ctx := testCtx(t)
	images := map[string]string{"turn-a": testImage("turn-a"), "turn-b": testImage("turn-b")}
	seed(t, cluster.Nodes, images["turn-a"], images["turn-b"])
	remover := importDelayedRemover(t)
	setConfig(t, delayedRemoverConfig(remover))
	t.Cleanup(func() { setConfig(t, baseConfig) })

	rec := startRecording(t)
	lists := []*eraserv1.ImageList{}
	for _, n := range []string{"turn-a", "turn-b"} {
		il := &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: eraserv1.ImageListSpec{Images: []string{images[n]}}}
		lists = append(lists, il)
	}
	// Created back to back: the two runs are asked for together.
	for _, il := range lists {
		if err := kube.Create(ctx, il); err != nil {
			t.Fatalf("creating ImageList %s: %v", il.Name, err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), il) })
	}
	started := time.Now()

	// Each run takes about workerDelay and a few seconds per node, the two
	// one after the other: minutes are many times that.
	for _, il := range lists {
		eventually(t, 5*time.Minute, "ImageList "+il.Name+" to record its run", func() (bool, string) {
			if err := kube.Get(ctx, client.ObjectKeyFromObject(il), il); err != nil {
				return false, err.Error()
			}
			ready := meta.FindStatusCondition(il.Status.Conditions, eraserv1.ConditionReady)
			return il.Status.Timestamp != nil && il.Status.ObservedGeneration == il.Generation &&
					ready != nil && ready.Status != metav1.ConditionUnknown,
				fmt.Sprintf("status %+v", il.Status)
		})
	}
	t.Logf("both runs recorded %.0fs after the lists were created", time.Since(started).Seconds())
	nodes := int64(len(cluster.Nodes))
	for _, il := range lists {
		ready := meta.FindStatusCondition(il.Status.Conditions, eraserv1.ConditionReady)
		if ready.Status != metav1.ConditionTrue || ready.Reason != eraserv1.ReasonSucceeded {
			t.Errorf("ImageList %s: Ready %s/%s (%s); want True/%s", il.Name, ready.Status, ready.Reason, ready.Message, eraserv1.ReasonSucceeded)
		}
		if il.Status.Success != nodes || il.Status.Failed != 0 {
			t.Errorf("ImageList %s: %d succeeded, %d failed; want %d, 0", il.Name, il.Status.Success, il.Status.Failed, nodes)
		}
		if r := il.Status.Results; r == nil || r.Removed != nodes {
			t.Errorf("ImageList %s: results %+v; want its image removed once per node", il.Name, r)
		}
	}
	for _, n := range cluster.Nodes {
		expectImages(t, n, nil, []string{images["turn-a"], images["turn-b"]})
	}
	expectJobsCleanedUp(t)
	// The watch has the final state of every pod once it saw them deleted.
	eventually(t, 2*time.Minute, "the watch to see every worker pod deleted", func() (bool, string) {
		seen, gone := rec.podCount()
		return seen >= 2*len(cluster.Nodes) && gone == seen, fmt.Sprintf("%d of %d pods seen deleted", gone, seen)
	})
	rec.stop()

	job := map[string]string{} // ImageList -> its run's ImageJob
	list := map[string]string{}
	for _, il := range lists {
		job[il.Name], list[il.Status.Job] = il.Status.Job, il.Name
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.errs {
		t.Error(e)
	}
	for _, o := range rec.overlaps {
		t.Errorf("two runs' unfinished worker pods on one node at once: %s", o)
	}
	for name, reasons := range rec.ready {
		t.Logf("ImageList %s: Ready %v", name, reasons)
	}
	mustQueue := map[string]string{} // ImageList -> the ImageJob it had to wait for
	for _, n := range cluster.Nodes {
		turns := rec.turnsOn(t, n.Name)
		if len(turns) != 2 || turns[0].job == turns[1].job {
			t.Errorf("%s: worker pods %v; want one of each run", n.Name, turns)
			continue
		}
		first, second := turns[0], turns[1]
		t.Logf("%s: %s ran %s..%s, then %s %s..%s", n.Name, first.pod, first.start.Format(time.TimeOnly), first.finish.Format(time.TimeOnly),
			second.pod, second.start.Format(time.TimeOnly), second.finish.Format(time.TimeOnly))
		// Container times have a resolution of one second: equal is
		// allowed, earlier is an overlap on the node.
		if second.start.Before(first.finish) {
			t.Errorf("%s: %s's remover started at %s, before %s's finished at %s", n.Name, second.pod, second.start, first.pod, first.finish)
		}
		if held := first.finish.Sub(first.start); held < workerDelay-time.Second {
			t.Errorf("%s: %s's worker ran %s, under workerDelay (%s): the delayed remover did not hold the node, the test proves nothing", n.Name, first.pod, held, workerDelay)
		}
		created, ok := rec.jobCreated[second.job]
		switch {
		case !ok:
			t.Errorf("%s: the watch never saw ImageJob %s", n.Name, second.job)
		case !created.Before(first.finish):
			t.Errorf("%s: ImageJob %s was created at %s, not before %s's worker finished at %s: the runs never met on the node, so the queue was not tested",
				n.Name, second.job, created, first.pod, first.finish)
		default:
			mustQueue[list[second.job]] = first.job
		}
	}
	if len(mustQueue) == 0 {
		t.Errorf("no run had to wait on any node; want the later run to wait on every node")
	}
	for l, behind := range mustQueue {
		if got, ok := rec.queued[l]; !ok {
			t.Errorf("ImageList %s had to wait for %s but was never seen Ready=Queued: %v", l, behind, rec.ready[l])
		} else if got != behind {
			t.Errorf("ImageList %s was seen Queued behind %q; want %q", l, got, behind)
		}
		if got := rec.jobWaited[job[l]]; got != behind {
			t.Errorf("ImageJob %s was seen waiting behind %q; want status.waiting > 0 behind %q", job[l], got, behind)
		}
	}
}

// turn is one worker pod's stay on its node: its remover container's start
// and finish, as the pod's status gives them.
type turn struct {
	pod, job      string
	start, finish time.Time
}

func (tr turn) String() string { return tr.pod + " of " + tr.job }

// turnsOn is the node's worker pods, in the order their removers started.
// Call with rec.mu held.
func (r *recording) turnsOn(t *testing.T, node string) []turn {
	t.Helper()
	var out []turn
	for _, p := range r.pods {
		if p.Spec.NodeName != node {
			continue
		}
		tr := turn{pod: p.Name, job: p.Labels[labelJob]}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				tr.start, tr.finish = s.State.Terminated.StartedAt.Time, s.State.Terminated.FinishedAt.Time
			}
		}
		if tr.finish.IsZero() {
			t.Errorf("%s: pod %s was deleted with no finished container: %+v", node, p.Name, p.Status)
			continue
		}
		out = append(out, tr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// delayedRemoverConfig is the base configuration with the remover's image
// replaced.
func delayedRemoverConfig(ref string) string {
	i := len(ref) - len(e2eVersion+"-delayed") - 1
	return strings.Replace(baseConfig, "components:\n",
		"components:\n  remover:\n    image:\n      repo: "+ref[:i]+"\n      tag: "+ref[i+1:]+"\n", 1)
}

// importDelayedRemover makes the released remover with testdata/delay in
// front of its entrypoint (see workerDelay) and imports it into every node,
// as the tier imports its test images; it returns its reference, which is
// in the tier's registry's namespace (so that the tier's exclusions and
// checks of Eraser's own images cover it), though it was never pushed. It is
// removed from the nodes when the test ends.
func importDelayedRemover(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(delay.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "e2e-delay", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := testimage.Layer(layerTar.Bytes())
	if err != nil {
		t.Fatal(err)
	}

	// The released remover, as a node pulls it from the tier's registry,
	// exported from the first node's runtime.
	ctr := func(n Node, args ...string) {
		t.Helper()
		args = append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)
		if out, err := command(repoRoot(), "ctr", args...).CombinedOutput(); err != nil {
			t.Fatalf("ctr %v on %s: %v: %s", args, n.Name, err, out)
		}
	}
	released := eraserImage("remover")
	for _, n := range cluster.Nodes {
		ctr(n, "images", "pull", "--plain-http", released)
	}
	exported := filepath.Join(dir, "remover.tar")
	ctr(cluster.Nodes[0], "images", "export", "--platform", "linux/amd64", exported, released)
	// The archive holds that one image (nil: its only one).
	img, err := tarball.ImageFromPath(exported, nil)
	if err != nil {
		t.Fatalf("reading the exported %s: %v", released, err)
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	if len(cf.Config.Entrypoint) == 0 {
		t.Fatalf("%s has no entrypoint to delay", released)
	}
	cf.Config.Entrypoint = append([]string{"/e2e-delay", workerDelay.String()}, cf.Config.Entrypoint...)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref := registryPath + "/remover:" + e2eVersion + "-delayed"
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "delayed.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range cluster.Nodes {
			_, _ = command(repoRoot(), "ctr", "--address", n.Socket, "--namespace", "k8s.io", "images", "rm", ref).CombinedOutput()
		}
	})
	for _, n := range cluster.Nodes {
		ctr(n, "images", "import", archive)
	}
	return ref
}
