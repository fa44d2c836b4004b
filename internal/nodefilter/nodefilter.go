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
	// ReasonNoWindowsScanner: Trivy cannot scan Windows images; a scheduled
	// run with the scanner on skips Windows nodes unless a Windows scanner
	// image is configured, so they never lose more than Linux nodes would.
	ReasonNoWindowsScanner = "NoWindowsScanner"
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

// Workers says which node OSes can run a job's worker pod: Linux and
// Windows, except Windows for a scheduled run that scans without a Windows
// scanner image.
func Workers(scheduled bool, cfg *config.Config) func(paths.OS) string {
	return func(os paths.OS) string {
		switch os {
		case paths.Linux:
			return ""
		case paths.Windows:
			if scheduled && cfg.Components.Scanner.Enabled && cfg.Components.Scanner.Windows.Image.Repo == "" {
				return ReasonNoWindowsScanner
			}
			return ""
		}
		return ReasonUnsupportedOS
	}
}

// Select splits nodes into targets (sorted by name) and skipped nodes. A node
// labelled eraser.sh/cleanup.filter is always left out; selectors (ORed)
// exclude or include per the filter type. Nodes that are not Ready are left
// out too: a pod bound to them would only wait for its start timeout.
// unsupported returns why a node OS cannot run this job's worker pod, or "".
func Select(nodes []corev1.Node, filter config.NodeFilter, unsupported func(paths.OS) string) ([]Target, []Skipped, error) {
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
		case unsupported(os) != "":
			skipped = append(skipped, Skipped{n.Name, unsupported(os)})
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
