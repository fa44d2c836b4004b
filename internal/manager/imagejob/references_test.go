package imagejob

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/references"
)

// refParts lists the job's cluster-set ConfigMaps, from the API server
// (the cache holds none).
func (f *fixture) refParts(job string) []string {
	f.t.Helper()
	var list corev1.ConfigMapList
	if err := env.Client.List(f.ctx, &list, client.InNamespace(f.ns), client.MatchingLabels{eraserv1.LabelReferences: "true", podspec.LabelJob: job}); err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, cm := range list.Items {
		if cm.Immutable == nil || !*cm.Immutable || len(cm.BinaryData[references.PartKey]) == 0 {
			f.t.Errorf("part %s is not an immutable ConfigMap with %s", cm.Name, references.PartKey)
		}
		names = append(names, cm.Name)
	}
	return names
}

// TestWavesCarryTheReferences: each wave's pods carry their node's set in
// their annotation and mount the cluster set of the wave's start; a wave
// whose set did not change writes nothing, one whose set changed writes new
// parts beside the old (earlier pods still mount them); a job waits while
// the index has not synced.
func TestWavesCarryTheReferences(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj(), builder.MakeNode("c").Obj())
	f.refs.unsynced = true
	f.refs.cluster = []references.Ref{{Image: "nginx:1.27", Owner: "Deployment web/front"}}
	f.refs.nodes = map[string][]references.Ref{"a": {{Image: "busybox", Owner: "Pod web/init-0"}}}
	// One node at a time: three waves.
	f.job("waves", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 1}}\n", "*")

	// The start fixes the nodes and goes on to the first wave, which waits.
	f.clock.Step(passInterval)
	f.settle()
	if _, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "waves"}}); !errors.Is(err, errNotSynced) {
		t.Fatalf("a wave before the index synced: %v, want errNotSynced", err)
	}
	if pods := f.pods("waves"); len(pods) != 0 {
		t.Fatalf("%d pods created before the index synced", len(pods))
	}

	f.refs.mu.Lock()
	f.refs.unsynced = false
	f.refs.mu.Unlock()
	f.reconcile("waves")
	pods := f.pods("waves")
	if len(pods) != 1 {
		t.Fatalf("%d pods after the first wave, want 1", len(pods))
	}
	first := f.refParts("waves")
	if len(first) != 1 {
		t.Fatalf("parts after the first wave: %v", first)
	}
	checkPod(t, pods[0], first)

	finish := func() {
		for _, p := range f.pods("waves") {
			if p.Status.Phase == "" || p.Status.Phase == corev1.PodPending {
				f.finishPod(&p, corev1.PodSucceeded, removed(0, 0))
			}
		}
	}
	finish()
	f.reconcile("waves") // the second wave: same set
	if got := f.refParts("waves"); !cmp.Equal(first, got) {
		t.Errorf("a wave with the same set wrote parts: %v, want %v", got, first)
	}
	finish()
	f.refs.mu.Lock()
	f.refs.cluster = append(f.refs.cluster, references.Ref{Image: "registry:5000/batch/job@sha256:" + strings.Repeat("a", 64), Owner: "CronJob batch/nightly"})
	f.refs.mu.Unlock()
	f.reconcile("waves") // the third wave: the set changed
	parts := f.refParts("waves")
	// No unfinished pod mounts the first set any longer: it is deleted.
	if len(parts) != 1 || parts[0] == first[0] {
		t.Fatalf("parts after the set changed: %v, want a new one alone (the old one's pods finished)", parts)
	}
	pods = f.pods("waves")
	if len(pods) != 3 {
		t.Fatalf("%d pods after three waves", len(pods))
	}
	for _, p := range pods {
		if p.Spec.NodeName == "c" {
			checkPod(t, p, parts)
		}
	}
}

// TestOwnersDoNotChangeTheSet: a wave whose cluster set names the same
// images by other owners (a pod scheduled, its template's name first now)
// writes nothing.
func TestOwnersDoNotChangeTheSet(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj())
	f.refs.cluster = []references.Ref{{Image: "nginx:1.27", Owner: "Pod web/front-0"}}
	f.job("owners", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 1}}\n", "*")
	f.reconcile("owners")
	first := f.refParts("owners")
	for _, p := range f.pods("owners") {
		f.finishPod(&p, corev1.PodSucceeded, removed(0, 0))
	}
	f.refs.mu.Lock()
	f.refs.cluster = []references.Ref{{Image: "nginx:1.27", Owner: "Deployment web/front"}, {Image: "nginx:1.27", Owner: "StatefulSet web/other"}}
	f.refs.mu.Unlock()
	f.reconcile("owners")
	if got := f.refParts("owners"); !cmp.Equal(first, got) {
		t.Errorf("parts after the owners changed: %v, want %v", got, first)
	}
	if pods := f.pods("owners"); len(pods) != 2 {
		t.Errorf("%d pods, want 2", len(pods))
	}
}

// TestSupersededReferencesKeptWhileMounted: a superseded set's parts stay
// while an unfinished pod of the job mounts them, and go at the first wave
// after the last such pod finished.
func TestSupersededReferencesKeptWhileMounted(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj(), builder.MakeNode("b").Obj(), builder.MakeNode("c").Obj(), builder.MakeNode("d").Obj())
	f.refs.nodes = map[string][]references.Ref{"a": {{Image: "busybox", Owner: "Pod web/init-0"}}}
	f.refs.cluster = []references.Ref{{Image: "nginx:1.27", Owner: "Deployment web/front"}}
	f.job("prune", podspec.KindManual, baseConfig+"manager: {imageJob: {maxConcurrentNodes: 2}}\n", "*")
	f.reconcile("prune") // a and b, with the first set
	first := f.refParts("prune")
	byNode := func() map[string]corev1.Pod {
		out := map[string]corev1.Pod{}
		for _, p := range f.pods("prune") {
			out[p.Spec.NodeName] = p
		}
		return out
	}
	pods := byNode()
	if len(pods) != 2 || len(first) != 1 {
		t.Fatalf("after the first wave: pods %v, parts %v", pods, first)
	}
	var firstNodes []string
	for n := range pods {
		firstNodes = append(firstNodes, n)
	}
	slices.Sort(firstNodes)
	done, running := pods[firstNodes[0]], pods[firstNodes[1]]
	f.finishPod(&done, corev1.PodSucceeded, removed(0, 0))
	f.runPod(&running)
	f.refs.mu.Lock()
	f.refs.cluster = append(f.refs.cluster, references.Ref{Image: "redis:7", Owner: "StatefulSet db/cache"})
	f.refs.mu.Unlock()
	f.reconcile("prune") // a third node, with a second set
	second := slices.DeleteFunc(f.refParts("prune"), func(n string) bool { return n == first[0] })
	if got := f.refParts("prune"); len(got) != 2 || len(second) != 1 {
		t.Fatalf("parts while a pod of the first set runs: %v, want both sets", got)
	}
	pods = byNode()
	if len(pods) != 3 {
		t.Fatalf("%d pods after the second wave, want 3", len(pods))
	}
	for _, p := range pods {
		want := first
		if !slices.Contains(firstNodes, p.Spec.NodeName) {
			want = second
		}
		checkPod(t, p, want)
	}
	running = pods[firstNodes[1]]
	f.finishPod(&running, corev1.PodSucceeded, removed(0, 0))
	f.reconcile("prune") // the fourth node: the first set is mounted by no unfinished pod
	if diff := cmp.Diff(second, f.refParts("prune")); diff != "" {
		t.Errorf("parts once the first set's pods finished (-want +got):\n%s", diff)
	}
	if len(byNode()) != 4 {
		t.Errorf("%d pods after the third wave, want 4", len(byNode()))
	}
}

// TestReferencesTooLargeForAPart: a reference larger than a part (the
// index drops such images; this one is given past it) does not stop the
// wave: the set is written incomplete, its pods are created, the job is
// told, and a pod of it mounts a set that says so.
func TestReferencesTooLargeForAPart(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("a").Obj())
	// Random letters and digits, which do not compress below a part.
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	huge := make([]byte, 1_228_821)
	for i := range huge {
		huge[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[rng.IntN(64)]
	}
	f.refs.nodes = map[string][]references.Ref{"a": {{Image: "busybox", Owner: "Pod web/init-0"}}}
	f.refs.cluster = []references.Ref{{Image: string(huge), Owner: "Deployment tenant-a/big"}, {Image: "nginx:1.27", Owner: "Deployment web/front"}}
	f.job("huge", podspec.KindManual, baseConfig, "*")
	f.reconcile("huge")
	pods := f.pods("huge")
	if len(pods) != 1 {
		t.Fatalf("%d pods, want 1", len(pods))
	}
	parts := f.refParts("huge")
	checkPod(t, pods[0], parts)
	f.expectEvent(eraserv1.ReasonReferencesIncomplete)
	var cm corev1.ConfigMap
	if err := env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: parts[0]}, &cm); err != nil {
		t.Fatal(err)
	}
	var cr references.ClusterReader
	var read []string
	if err := cr.Scan(parts[0], bytes.NewReader(cm.BinaryData[references.PartKey]), func(r references.Ref) { read = append(read, r.Image) }); err != nil {
		t.Fatal(err)
	}
	if err := cr.Done(); err != nil || cr.Complete() {
		t.Errorf("the set's part: Done %v, complete %v; want a whole, incomplete set", err, cr.Complete())
	}
	if diff := cmp.Diff([]string{"nginx:1.27"}, read); diff != "" {
		t.Errorf("references in the part (-want +got):\n%s", diff)
	}
}

// TestMountedSets: which sets the job's unfinished pods mount, and when
// that cannot be told.
func TestMountedSets(t *testing.T) {
	job := builder.MakeImageJob("j").Obj()
	job.UID = "job-uid"
	pod := func(name string, set string, phase corev1.PodPhase) *corev1.Pod {
		p := builder.MakePod(name, "n-"+name, time.Unix(0, 0)).Job("j").Phase(phase).Obj()
		p.Namespace = "eraser-system"
		if set != "" {
			p.Labels[jobdata.LabelReferenceSet] = set
		}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ImageJob", Name: "j", UID: job.UID, Controller: ptr.To(true)}}
		return p
	}
	other := pod("other-run", "old", corev1.PodRunning)
	other.OwnerReferences[0].UID = "another"
	type result struct {
		Sets []string
		OK   bool
	}
	cases := map[string]struct {
		pods   []*corev1.Pod
		unseen int
		want   result
	}{
		"none":               {want: result{Sets: []string{"cur"}, OK: true}},
		"running and queued": {pods: []*corev1.Pod{pod("a", "s1", corev1.PodRunning), pod("b", "s2", corev1.PodPending), pod("c", "s2", "")}, want: result{Sets: []string{"cur", "s1", "s2"}, OK: true}},
		"finished mount nothing": {pods: []*corev1.Pod{pod("a", "s1", corev1.PodSucceeded), pod("b", "s2", corev1.PodFailed)},
			want: result{Sets: []string{"cur"}, OK: true}},
		"another run's pod":              {pods: []*corev1.Pod{other}, want: result{Sets: []string{"cur"}, OK: true}},
		"a pod without the label":        {pods: []*corev1.Pod{pod("a", "", corev1.PodRunning)}, want: result{}},
		"a finished pod without a label": {pods: []*corev1.Pod{pod("a", "", corev1.PodSucceeded)}, want: result{Sets: []string{"cur"}, OK: true}},
		"a pod the cache does not show":  {unseen: 1, want: result{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sets, ok := mountedSets(tc.pods, "eraser-system", job, tc.unseen, "cur")
			got := result{OK: ok}
			for s := range sets {
				got.Sets = append(got.Sets, s)
			}
			slices.Sort(got.Sets)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// checkPod: the pod's annotation is its node's set, and its projected
// volume the parts named.
func checkPod(t *testing.T, pod corev1.Pod, parts []string) {
	t.Helper()
	want := map[string][]references.Ref{"a": {{Image: "busybox", Owner: "Pod web/init-0"}}}[pod.Spec.NodeName]
	got := pod.Annotations[references.AnnotationNode]
	var node []references.Ref
	if _, err := references.ScanNode(strings.NewReader(got), func(r references.Ref) { node = append(node, r) }); err != nil {
		t.Fatalf("pod on %s: its annotation: %v", pod.Spec.NodeName, err)
	}
	if diff := cmp.Diff(want, node); diff != "" {
		t.Errorf("pod on %s: the node's set in its annotation (-want +got):\n%s", pod.Spec.NodeName, diff)
	}
	var mounted []string
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			mounted = append(mounted, s.ConfigMap.Name)
		}
	}
	if diff := cmp.Diff(parts, mounted); diff != "" {
		t.Errorf("pod on %s mounts parts (-want +got):\n%s", pod.Spec.NodeName, diff)
	}
}
