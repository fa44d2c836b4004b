package cacheopts

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/scanshare"
)

// TestTrimNodeKeepsTheDecision: for random nodes and every kind of rule,
// the node filter decides the same on trimmed nodes as on whole ones. A
// field the filter reads and the cache drops fails here.
func TestTrimNodeKeepsTheDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}
	var whole, trimmed []corev1.Node
	for i := range 200 {
		b := builder.MakeNode(fmt.Sprintf("n-%d", i))
		if rng.IntN(2) == 0 {
			b.Label("pool", []string{"gpu", "cpu"}[rng.IntN(2)])
		}
		if rng.IntN(4) == 0 {
			b.Label(config.CleanupFilterLabel, "true")
		}
		if rng.IntN(5) == 0 {
			b.OS("windows")
		}
		for range rng.IntN(3) {
			b.Taint([]string{"dedicated", "gpu", "node-role.kubernetes.io/control-plane"}[rng.IntN(3)], "x", effects[rng.IntN(3)])
		}
		n := b.Obj()
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[rng.IntN(2)]},
		}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1}}
		out, err := TrimNode(n)
		if err != nil {
			t.Fatal(err)
		}
		whole, trimmed = append(whole, *n), append(trimmed, *out.(*corev1.Node))
	}
	rules := map[string]config.Config{}
	for name, doc := range map[string]string{
		"defaults":                 "apiVersion: eraser.sh/v1alpha3\n",
		"include filter":           "apiVersion: eraser.sh/v1alpha3\nmanager: {nodeFilter: {type: include, selectors: [pool=gpu]}}\n",
		"selector and tolerations": "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {nodeSelector: {pool: gpu}, tolerations: [{key: dedicated, operator: Exists}]}}\n",
	} {
		cfg, _, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		rules[name] = *cfg
	}
	for name, cfg := range rules {
		t.Run(name, func(t *testing.T) {
			r := nodefilter.RulesFor(false, &cfg)
			wantT, wantS, err := nodefilter.Select(whole, r)
			if err != nil {
				t.Fatal(err)
			}
			gotT, gotS, err := nodefilter.Select(trimmed, r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantT, gotT); diff != "" {
				t.Errorf("targets (-whole +trimmed):\n%s", diff)
			}
			if diff := cmp.Diff(wantS, gotS); diff != "" {
				t.Errorf("skipped (-whole +trimmed):\n%s", diff)
			}
		})
	}
}

// TestTrimPodKeepsTheScanAnnotations: of a worker pod's annotations, the
// cache keeps what a new leader reads (the scan service's address and the
// run's DB), and nothing else.
func TestTrimPodKeepsTheScanAnnotations(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want map[string]string
	}{
		"scanner's pod": {
			in:   map[string]string{scanshare.AnnotationService: "http://10.0.0.5:8890", scanshare.AnnotationDB: "r:2@sha256:x", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
			want: map[string]string{scanshare.AnnotationService: "http://10.0.0.5:8890", scanshare.AnnotationDB: "r:2@sha256:x"},
		},
		"no scanner": {in: map[string]string{"other": "x"}},
		"none":       {},
	} {
		out, err := TrimPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: tc.in}})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, out.(*corev1.Pod).Annotations); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
