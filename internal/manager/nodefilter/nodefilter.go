// Package nodefilter decides which nodes an ImageJob runs on.
package nodefilter

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// Target is an eligible node.
type Target struct {
	Name string
	OS   podpaths.OS
}

// Skipped is a node left out, and why.
type Skipped struct {
	Name   string
	Reason string
	// Detail names the one thing that decided it, where there is one: the
	// taint (key=value:Effect) or the selector's label (key=value). It
	// never contains a space.
	Detail string
}

// Rules are what a node must satisfy to get a worker pod.
type Rules struct {
	Filter config.NodeFilter
	// NodeSelector lists labels a node must all carry.
	NodeSelector map[string]string
	// Tolerations are the worker pods' own; nil tolerates every taint.
	Tolerations []corev1.Toleration
	// Unsupported returns why a node OS cannot run the job's worker pod, or
	// "" if it can.
	Unsupported func(podpaths.OS) string
}

// RulesFor are the rules of a job (scheduled or not) run under cfg.
func RulesFor(scheduled bool, cfg *config.Config) Rules {
	return Rules{
		Filter:       cfg.Manager.NodeFilter,
		NodeSelector: cfg.Manager.ImageJob.NodeSelector,
		Tolerations:  cfg.Manager.ImageJob.Tolerations,
		Unsupported:  Workers(scheduled, cfg),
	}
}

// Workers says which node OSes can run a job's worker pod: Linux and
// Windows, except Windows for a scheduled run that scans without a Windows
// scanner image.
func Workers(scheduled bool, cfg *config.Config) func(podpaths.OS) string {
	return func(os podpaths.OS) string {
		switch os {
		case podpaths.Linux:
			return ""
		case podpaths.Windows:
			if scheduled && cfg.Components.Scanner.Enabled && cfg.Components.Scanner.Windows.Image.Repo == "" {
				return eraserv1.ReasonNoWindowsScanner
			}
			return ""
		}
		return eraserv1.ReasonUnsupportedOS
	}
}

// Select splits nodes into targets (sorted by name) and skipped nodes. The
// label eraser.sh/cleanup.filter counts as one more selector whatever the
// configuration lists, as upstream has it: an exclude filter leaves a labelled
// node out, an include filter takes it in beside the nodes its selectors
// (ORed) match. A node must then carry every label of the node selector. Nodes that are not Ready are left out too: a pod bound
// to them would only wait for its start timeout. Last come the node's OS and,
// when tolerations are set, its taints.
func Select(nodes []corev1.Node, r Rules) ([]Target, []Skipped, error) {
	var sels []labels.Selector
	for _, s := range r.Filter.Selectors {
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, nil, fmt.Errorf("node selector %q: %w", s, err)
		}
		sels = append(sels, sel)
	}
	matches := func(n *corev1.Node) bool {
		for _, sel := range sels {
			if sel.Matches(labels.Set(n.Labels)) {
				return true
			}
		}
		return false
	}
	required := slices.Sorted(maps.Keys(r.NodeSelector))
	var targets []Target
	var skipped []Skipped
	for i := range nodes {
		n := &nodes[i]
		os := podpaths.OS(n.Labels[corev1.LabelOSStable])
		if os == "" {
			os = podpaths.Linux
		}
		_, cleanup := n.Labels[config.CleanupFilterLabel]
		missing := slices.IndexFunc(required, func(k string) bool {
			v, ok := n.Labels[k]
			return !ok || v != r.NodeSelector[k]
		})
		switch {
		case cleanup && r.Filter.Type == config.FilterExclude:
			skipped = append(skipped, Skipped{Name: n.Name, Reason: eraserv1.ReasonCleanupFilter})
		case r.Filter.Type == config.FilterExclude && matches(n), r.Filter.Type == config.FilterInclude && !cleanup && !matches(n):
			skipped = append(skipped, Skipped{Name: n.Name, Reason: eraserv1.ReasonFiltered})
		case missing >= 0:
			k := required[missing]
			skipped = append(skipped, Skipped{Name: n.Name, Reason: eraserv1.ReasonNodeSelector, Detail: k + "=" + r.NodeSelector[k]})
		case !ready(n):
			skipped = append(skipped, Skipped{Name: n.Name, Reason: eraserv1.ReasonNotReady})
		case r.Unsupported(os) != "":
			skipped = append(skipped, Skipped{Name: n.Name, Reason: r.Unsupported(os)})
		default:
			if taint := untolerated(n, r.Tolerations); taint != nil {
				skipped = append(skipped, Skipped{Name: n.Name, Reason: eraserv1.ReasonTainted, Detail: taint.ToString()})
				continue
			}
			targets = append(targets, Target{Name: n.Name, OS: os})
		}
	}
	sort.Slice(targets, func(a, b int) bool { return targets[a].Name < targets[b].Name })
	sort.Slice(skipped, func(a, b int) bool { return skipped[a].Name < skipped[b].Name })
	return targets, skipped, nil
}

// untolerated returns the node's first NoSchedule or NoExecute taint that
// none of the tolerations tolerates, or nil; nil tolerations tolerate all.
// PreferNoSchedule only steers the scheduler, which these pods bypass.
func untolerated(n *corev1.Node, tolerations []corev1.Toleration) *corev1.Taint {
	if tolerations == nil {
		return nil
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		// The configuration refuses Lt and Gt, so the comparison operators
		// stay off and the logger is never written to.
		tolerated := slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(klog.Background(), taint, false)
		})
		if !tolerated {
			return taint
		}
	}
	return nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	// A node that reports no conditions at all (a fresh or simulated one)
	// is given the benefit of the doubt; its pod's start timeout still applies.
	return true
}
