package nodefilter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/eraser-oss/eraser/internal/builder"
	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/paths"
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
	linuxOnly := func(os paths.OS) string {
		if os == paths.Linux {
			return ""
		}
		return ReasonUnsupportedOS
	}
	all := func(paths.OS) string { return "" }
	cases := map[string]struct {
		filter      config.NodeFilter
		supported   func(paths.OS) string
		wantTargets []string
		wantSkipped []Skipped
	}{
		"default exclude": {
			filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{config.CleanupFilterLabel}}, supported: linuxOnly,
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}, {"win", ReasonUnsupportedOS}},
		},
		"exclude windows as upstream ships": {
			filter: config.NodeFilter{Type: config.FilterExclude, Selectors: []string{config.CleanupFilterLabel, "kubernetes.io/os=windows"}}, supported: all,
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}, {"win", ReasonFiltered}},
		},
		"include a pool; cleanup.filter still excludes": {
			filter: config.NodeFilter{Type: config.FilterInclude, Selectors: []string{"pool=gpu"}}, supported: all,
			wantTargets: []string{"a"},
			wantSkipped: []Skipped{{"b", ReasonFiltered}, {"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonFiltered}, {"win", ReasonFiltered}},
		},
		"scheduled scan without a Windows scanner": {
			filter: config.NodeFilter{Type: config.FilterExclude}, supported: Workers(true, scanning(false)),
			wantTargets: []string{"a", "b"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}, {"win", ReasonNoWindowsScanner}},
		},
		"scheduled scan with a Windows scanner": {
			filter: config.NodeFilter{Type: config.FilterExclude}, supported: Workers(true, scanning(true)),
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}},
		},
		"imagelist runs on windows": {
			filter: config.NodeFilter{Type: config.FilterExclude}, supported: Workers(false, scanning(false)),
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}},
		},
		"windows supported": {
			filter: config.NodeFilter{Type: config.FilterExclude}, supported: all,
			wantTargets: []string{"a", "b", "win"},
			wantSkipped: []Skipped{{"c", ReasonCleanupFilter}, {"c2", ReasonCleanupFilter}, {"down", ReasonNotReady}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			targets, skipped, err := Select(nodes, tc.filter, tc.supported)
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
	if _, _, err := Select(nodes, config.NodeFilter{Type: config.FilterExclude, Selectors: []string{"a=b=c"}}, all); err == nil {
		t.Error("a bad selector was accepted")
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
