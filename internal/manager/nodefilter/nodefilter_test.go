package nodefilter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

func TestSelect(t *testing.T) {
	notReady := builder.MakeNode("down").Obj()
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	nodes := []corev1.Node{
		*builder.MakeNode("b").Obj(),
		*builder.MakeNode("a").Label("pool", "gpu").Obj(),
		*builder.MakeNode("c").Label(config.CleanupFilterLabel, "").Obj(),
		*builder.MakeNode("c2").Label(config.CleanupFilterLabel, "").Label("pool", "gpu").Obj(),
		*builder.MakeNode("win").OS("windows").Obj(),
		*notReady,
	}
	linuxOnly := func(os podpaths.OS) string {
		if os == podpaths.Linux {
			return ""
		}
		return eraserv1.ReasonUnsupportedOS
	}
	all := func(podpaths.OS) string { return "" }
	cases := map[string]struct {
		rules       Rules
		wantTargets []string
		wantSkipped []Skipped
	}{
		"default exclude": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{config.CleanupFilterLabel}}, Unsupported: linuxOnly},
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}, {Name: "win", Reason: eraserv1.ReasonUnsupportedOS}},
		},
		"exclude windows as upstream ships": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{config.CleanupFilterLabel, "kubernetes.io/os=windows"}}, Unsupported: all},
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}, {Name: "win", Reason: eraserv1.ReasonFiltered}},
		},
		// Upstream appends the label to an include filter's selectors too,
		// so it takes a node in whether the configuration lists it or not.
		"include a pool; cleanup.filter includes too": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterInclude, Selectors: []string{"pool=gpu"}}, Unsupported: all},
			wantTargets: []string{"a", "c", "c2"},
			wantSkipped: []Skipped{{Name: "b", Reason: eraserv1.ReasonFiltered}, {Name: "down", Reason: eraserv1.ReasonFiltered}, {Name: "win", Reason: eraserv1.ReasonFiltered}},
		},
		"include by cleanup.filter, as upstream's include configuration": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterInclude, Selectors: []string{config.CleanupFilterLabel}}, Unsupported: all},
			wantTargets: []string{"c", "c2"},
			wantSkipped: []Skipped{{Name: "a", Reason: eraserv1.ReasonFiltered}, {Name: "b", Reason: eraserv1.ReasonFiltered}, {Name: "down", Reason: eraserv1.ReasonFiltered}, {Name: "win", Reason: eraserv1.ReasonFiltered}},
		},
		"include with no selectors takes the labelled nodes only": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterInclude}, Unsupported: all},
			wantTargets: []string{"c", "c2"},
			wantSkipped: []Skipped{{Name: "a", Reason: eraserv1.ReasonFiltered}, {Name: "b", Reason: eraserv1.ReasonFiltered}, {Name: "down", Reason: eraserv1.ReasonFiltered}, {Name: "win", Reason: eraserv1.ReasonFiltered}},
		},
		"exclude without listing cleanup.filter still leaves labelled nodes out": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{"pool=gpu"}}, Unsupported: all},
			wantTargets: []string{"b", "win"},
			wantSkipped: []Skipped{{Name: "a", Reason: eraserv1.ReasonFiltered}, {Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
		"scheduled scan without a Windows scanner": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude}, Unsupported: Workers(true, scanning(false))},
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}, {Name: "win", Reason: eraserv1.ReasonNoWindowsScanner}},
		},
		"scheduled scan with a Windows scanner": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude}, Unsupported: Workers(true, scanning(true))},
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
		"imagelist runs on windows": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude}, Unsupported: Workers(false, scanning(false))},
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
		"windows supported": {
			rules:       Rules{Filter: config.NodeFilter{Type: config.FilterExclude}, Unsupported: all},
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{Name: "c", Reason: eraserv1.ReasonCleanupFilter}, {Name: "c2", Reason: eraserv1.ReasonCleanupFilter}, {Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			targets, skipped, err := Select(nodes, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tg := range targets {
				names = append(names, tg.Name)
			}
			if diff := cmp.Diff(tc.wantTargets, names); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSkipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, err := Select(nodes, Rules{Filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{"a=b=c"}}, Unsupported: all}); err == nil {
		t.Error("a bad selector was accepted")
	}
}

// TestSelectBySelectorAndTaints: manager.imageJob.nodeSelector and
// manager.imageJob.tolerations, which upstream does not have.
func TestSelectBySelectorAndTaints(t *testing.T) {
	notReady := builder.MakeNode("down").Label("pool", "gpu").Taint("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoSchedule).Obj()
	notReady.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	nodes := []corev1.Node{
		*builder.MakeNode("gpu").Label("pool", "gpu").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(),
		*builder.MakeNode("cpu").Label("pool", "cpu").Obj(),
		*builder.MakeNode("bare").Obj(),
		*builder.MakeNode("cp").Label("pool", "gpu").Taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule).Obj(),
		*builder.MakeNode("spot").Label("pool", "gpu").Label("zone", "a").Taint("spot", "true", corev1.TaintEffectPreferNoSchedule).Obj(),
		*builder.MakeNode("evict").Label("pool", "gpu").Taint("maintenance", "", corev1.TaintEffectNoExecute).Obj(),
		*builder.MakeNode("win").OS("windows").Label("pool", "gpu").Taint("os", "windows", corev1.TaintEffectNoSchedule).Obj(),
		*notReady,
	}
	all := func(podpaths.OS) string { return "" }
	exclude := config.NodeFilter{Type: config.FilterExclude, Selectors: []string{config.CleanupFilterLabel}}
	cases := map[string]struct {
		selector    map[string]string
		tolerations []corev1.Toleration
		wantTargets []string
		wantSkipped []Skipped
	}{
		"unset tolerates every taint, as upstream": {
			wantTargets: []string{"bare", "cp", "cpu", "evict", "gpu", "spot", "win"},
			wantSkipped: []Skipped{{Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
		"node selector": {
			selector:    map[string]string{"pool": "gpu"},
			wantTargets: []string{"cp", "evict", "gpu", "spot", "win"},
			wantSkipped: []Skipped{
				{Name: "bare", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=gpu"},
				{Name: "cpu", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=gpu"},
				{Name: "down", Reason: eraserv1.ReasonNotReady},
			},
		},
		"every pair must match; the first missing by key is named": {
			selector:    map[string]string{"zone": "a", "pool": "gpu"},
			wantTargets: []string{"spot"},
			wantSkipped: []Skipped{
				{Name: "bare", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=gpu"},
				{Name: "cp", Reason: eraserv1.ReasonNodeSelector, Detail: "zone=a"},
				{Name: "cpu", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=gpu"},
				{Name: "down", Reason: eraserv1.ReasonNodeSelector, Detail: "zone=a"},
				{Name: "evict", Reason: eraserv1.ReasonNodeSelector, Detail: "zone=a"},
				{Name: "gpu", Reason: eraserv1.ReasonNodeSelector, Detail: "zone=a"},
				{Name: "win", Reason: eraserv1.ReasonNodeSelector, Detail: "zone=a"},
			},
		},
		// PreferNoSchedule never skips; NotReady is told rather than the
		// not-ready taint that comes with it.
		"no tolerations skip NoSchedule and NoExecute taints": {
			tolerations: []corev1.Toleration{},
			wantTargets: []string{"bare", "cpu", "spot"},
			wantSkipped: []Skipped{
				{Name: "cp", Reason: eraserv1.ReasonTainted, Detail: "node-role.kubernetes.io/control-plane:NoSchedule"},
				{Name: "down", Reason: eraserv1.ReasonNotReady},
				{Name: "evict", Reason: eraserv1.ReasonTainted, Detail: "maintenance:NoExecute"},
				{Name: "gpu", Reason: eraserv1.ReasonTainted, Detail: "dedicated=gpu:NoSchedule"},
				{Name: "win", Reason: eraserv1.ReasonTainted, Detail: "os=windows:NoSchedule"},
			},
		},
		"tolerated by key, value and effect": {
			tolerations: []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists},
				{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
			},
			wantTargets: []string{"bare", "cp", "cpu", "evict", "gpu", "spot"},
			wantSkipped: []Skipped{{Name: "down", Reason: eraserv1.ReasonNotReady}, {Name: "win", Reason: eraserv1.ReasonTainted, Detail: "os=windows:NoSchedule"}},
		},
		"another value or effect is not tolerated": {
			tolerations: []corev1.Toleration{
				{Key: "dedicated", Value: "cpu"},
				{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			wantTargets: []string{"bare", "cpu", "spot"},
			wantSkipped: []Skipped{
				{Name: "cp", Reason: eraserv1.ReasonTainted, Detail: "node-role.kubernetes.io/control-plane:NoSchedule"},
				{Name: "down", Reason: eraserv1.ReasonNotReady},
				{Name: "evict", Reason: eraserv1.ReasonTainted, Detail: "maintenance:NoExecute"},
				{Name: "gpu", Reason: eraserv1.ReasonTainted, Detail: "dedicated=gpu:NoSchedule"},
				{Name: "win", Reason: eraserv1.ReasonTainted, Detail: "os=windows:NoSchedule"},
			},
		},
		"an empty key with Exists tolerates all": {
			tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			wantTargets: []string{"bare", "cp", "cpu", "evict", "gpu", "spot", "win"},
			wantSkipped: []Skipped{{Name: "down", Reason: eraserv1.ReasonNotReady}},
		},
		"the node selector is told before a taint": {
			selector:    map[string]string{"pool": "cpu"},
			tolerations: []corev1.Toleration{},
			wantTargets: []string{"cpu"},
			wantSkipped: []Skipped{
				{Name: "bare", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "cp", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "down", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "evict", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "gpu", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "spot", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
				{Name: "win", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=cpu"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			targets, skipped, err := Select(nodes, Rules{Filter: exclude, NodeSelector: tc.selector, Tolerations: tc.tolerations, Unsupported: all})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tg := range targets {
				names = append(names, tg.Name)
			}
			if diff := cmp.Diff(tc.wantTargets, names); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSkipped, skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRulesFor: the job's rules come from the configuration it runs with.
func TestRulesFor(t *testing.T) {
	cfg, _, err := config.Parse([]byte("apiVersion: eraser.sh/v1alpha2\nmanager: {imageJob: {nodeSelector: {pool: gpu}, tolerations: [{key: dedicated, operator: Exists}]}}"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := []corev1.Node{
		*builder.MakeNode("gpu").Label("pool", "gpu").Taint("dedicated", "x", corev1.TaintEffectNoExecute).Obj(),
		*builder.MakeNode("gpu-cp").Label("pool", "gpu").Taint("node-role.kubernetes.io/control-plane", "", corev1.TaintEffectNoSchedule).Obj(),
		*builder.MakeNode("cpu").Label("pool", "cpu").Obj(),
	}
	targets, skipped, err := Select(nodes, RulesFor(false, cfg))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Target{{Name: "gpu", OS: podpaths.Linux}}, targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	want := []Skipped{
		{Name: "cpu", Reason: eraserv1.ReasonNodeSelector, Detail: "pool=gpu"},
		{Name: "gpu-cp", Reason: eraserv1.ReasonTainted, Detail: "node-role.kubernetes.io/control-plane:NoSchedule"},
	}
	if diff := cmp.Diff(want, skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
}

func scanning(windowsScanner bool) *config.Config {
	c := config.Default()
	c.Components.Collector.Enabled, c.Components.Scanner.Enabled = true, true
	if windowsScanner {
		c.Components.Scanner.Windows.Image = config.Image{Repo: "scanner-win", Tag: "1"}
	}
	return c
}

func TestMaxConcurrent(t *testing.T) {
	cases := map[string]struct {
		m     config.MaxConcurrent
		nodes int
		want  int
	}{
		"unset":            {m: config.MaxConcurrent{}, nodes: 100, want: 0},
		"count":            {m: config.MaxConcurrent{Count: 7}, nodes: 100, want: 7},
		"percent":          {m: config.MaxConcurrent{Percent: 10}, nodes: 600, want: 60},
		"percent at least": {m: config.MaxConcurrent{Percent: 10}, nodes: 3, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.m.Of(tc.nodes); got != tc.want {
				t.Errorf("Of(%d) = %d, want %d", tc.nodes, got, tc.want)
			}
		})
	}
}
