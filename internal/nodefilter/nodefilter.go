// Package nodefilter decides which nodes an ImageJob runs on.
package nodefilter

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/eraser-oss/eraser/internal/config"
	"github.com/eraser-oss/eraser/internal/paths"
)

// Skip reasons.
const (
	ReasonFiltered      = "Filtered"
	ReasonCleanupFilter = "CleanupFilter"
	ReasonNotReady      = "NotReady"
	ReasonUnsupportedOS = "UnsupportedOS"
)

// Target is an eligible node.
type Target struct {
	Name string
	OS   paths.OS
}

// Skipped is a node left out, and why.
type Skipped struct {
	Name   string
	Reason string
}

// Select splits nodes into targets (sorted by name) and skipped nodes. A node
// labelled eraser.sh/cleanup.filter is always left out; selectors (ORed)
// exclude or include per the filter type. Nodes that are not Ready are left
// out too: a pod bound to them would only wait for its start timeout.
// supported says which node OSes have a worker pod.
func Select(nodes []corev1.Node, filter config.NodeFilter, supported func(paths.OS) bool) ([]Target, []Skipped, error) {
	var sels []labels.Selector
	for _, s := range filter.Selectors {
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
	var targets []Target
	var skipped []Skipped
	for i := range nodes {
		n := &nodes[i]
		os := paths.OS(n.Labels[corev1.LabelOSStable])
		if os == "" {
			os = paths.Linux
		}
		_, cleanup := n.Labels[config.CleanupFilterLabel]
		switch {
		case cleanup:
			skipped = append(skipped, Skipped{n.Name, ReasonCleanupFilter})
		case filter.Type == config.FilterExclude && matches(n), filter.Type == config.FilterInclude && !matches(n):
			skipped = append(skipped, Skipped{n.Name, ReasonFiltered})
		case !ready(n):
			skipped = append(skipped, Skipped{n.Name, ReasonNotReady})
		case !supported(os):
			skipped = append(skipped, Skipped{n.Name, ReasonUnsupportedOS})
		default:
			targets = append(targets, Target{Name: n.Name, OS: os})
		}
	}
	sort.Slice(targets, func(a, b int) bool { return targets[a].Name < targets[b].Name })
	sort.Slice(skipped, func(a, b int) bool { return skipped[a].Name < skipped[b].Name })
	return targets, skipped, nil
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
