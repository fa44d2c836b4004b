package imagejob

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/builder"
	"github.com/eraser-oss/eraser/internal/podspec"
	"github.com/eraser-oss/eraser/internal/references"
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
	if len(parts) != 2 {
		t.Fatalf("parts after the set changed: %v, want the old and a new one", parts)
	}
	pods = f.pods("waves")
	if len(pods) != 3 {
		t.Fatalf("%d pods after three waves", len(pods))
	}
	for _, p := range pods {
		if p.Spec.NodeName == "c" {
			var latest []string
			for _, name := range parts {
				if name != first[0] {
					latest = append(latest, name)
				}
			}
			checkPod(t, p, latest)
		}
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
