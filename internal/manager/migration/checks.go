package migration

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/eraser-oss/eraser/internal/wire/config"
	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// Names upstream's chart and manifest and this chart share.
const (
	// LabelExclusionList marks exclusion-list ConfigMaps.
	LabelExclusionList = "eraser.sh/exclude.list"
	// UpstreamImageList is the one ImageList name upstream ran.
	UpstreamImageList = "imagelist"
	// LabelCleanupFilter is the node label upstream's and this filter
	// always add to manager.nodeFilter's selectors.
	LabelCleanupFilter = "eraser.sh/cleanup.filter"
)

// Check lists every difference between what runs in the cluster now
// (upstream Eraser, or this one before an upgrade) and what this Eraser
// will run, blocking ones first.
func Check(c Cluster) []Finding {
	var out []Finding
	out = append(out, managerFindings(c)...)
	out = append(out, configFindings(c)...)
	out = append(out, exclusionFindings(c)...)
	out = append(out, imageListFindings(c)...)
	Sort(out)
	return out
}

func (c Cluster) configMap(name string) *corev1.ConfigMap {
	for i := range c.ConfigMaps {
		if c.ConfigMaps[i].Name == name && c.ConfigMaps[i].Namespace == c.Namespace {
			return &c.ConfigMaps[i]
		}
	}
	return nil
}

// configFindings: the EraserConfig read by this Eraser's own parser, its
// warnings, and the defaults whose meaning changed.
func configFindings(c Cluster) []Finding {
	cm := c.configMap(config.ConfigMapName)
	if cm == nil {
		return nil
	}
	obj := "configmap/" + cm.Namespace + "/" + cm.Name
	f := func(s Severity, what string) Finding {
		return Finding{Severity: s, Area: "configuration", Object: obj, What: what}
	}
	cfg, warnings, err := config.Parse([]byte(cm.Data[config.ConfigKey]))
	if err != nil {
		return []Finding{f(Blocking, fmt.Sprintf("refused by this Eraser, whose manager would be held back (running nothing) until it is fixed: %v (kubectl eraser config check -f FILE checks a fix)", err))}
	}
	var out []Finding
	for _, w := range warnings {
		out = append(out, f(Difference, w))
	}
	out = append(out, workerSizeFindings(cfg, f)...)
	if nf := cfg.Manager.NodeFilter; nf.Type == config.FilterInclude {
		out = append(out, f(Difference, fmt.Sprintf("manager.nodeFilter is type include (selectors %s, and the label %s that is always added to them): check which nodes get a worker with `kubectl eraser plan` after the upgrade",
			strings.Join(nf.Selectors, ", "), LabelCleanupFilter)))
	}
	if sc := cfg.Components.Scanner; sc.Enabled && cfg.Components.Collector.Enabled {
		if scfg, _, err := scanconfig.Parse(sc.Config); err == nil && !scfg.DeleteFailedImages {
			out = append(out, f(Difference, "images the scanner fails to scan are kept (upstream removed them): set deleteFailedImages: true in components.scanner.config to remove them"))
		}
	}
	if cfg.Components.Collector.Enabled {
		out = append(out, f(Difference, fmt.Sprintf("scheduled runs keep images pulled less than manager.retention.minAge (%s) ago, images that workloads (scaled-down Deployments, CronJobs) reference and images that cannot be pulled again, which upstream removed", cfg.Manager.Retention.MinAge)))
	}
	return out
}

// Upstream's default worker sizes, as its EraserConfig wrote them out.
var (
	upstreamScannerCPU   = resource.MustParse("1000m")
	upstreamScannerMem   = resource.MustParse("500Mi")
	upstreamRemoverLimit = resource.MustParse("30Mi")
)

// workerSizeFindings: upstream's default worker sizes that a copied
// configuration carries. The chart drops them for this release's defaults
// and says so in its notes; a configuration applied any other way keeps
// them, so the scanner's request would have a packed node's kubelet refuse
// the pod (OutOfcpu), worker pods going to their node by name.
func workerSizeFindings(cfg *config.Config, f func(Severity, string) Finding) []Finding {
	def := config.Default().Components
	var out []Finding
	if r := cfg.Components.Scanner.Request; equal(r.CPU, upstreamScannerCPU) && equal(r.Mem, upstreamScannerMem) {
		out = append(out, f(Difference, fmt.Sprintf("components.scanner.request (cpu 1000m, mem 500Mi) is upstream's default, which a packed node's kubelet refuses (OutOfcpu): the chart uses this release's (cpu %s, mem %s) instead; in a configuration applied otherwise, delete the two keys",
			def.Scanner.Request.CPU, def.Scanner.Request.Mem)))
	}
	if equal(cfg.Components.Remover.Limit.Mem, upstreamRemoverLimit) {
		out = append(out, f(Difference, fmt.Sprintf("the remover's limit.mem 30Mi is upstream's default, at the edge for a node with many images: the chart uses this release's (%s) instead; in a configuration applied otherwise, delete the key",
			def.Remover.Limit.Mem)))
	}
	return out
}

func equal(q *resource.Quantity, want resource.Quantity) bool {
	return q != nil && q.Cmp(want) == 0
}

// exclusionFindings: each exclusion list entry or field read differently
// from upstream, and lists every worker would fail on.
func exclusionFindings(c Cluster) []Finding {
	var out []Finding
	for i := range c.ConfigMaps {
		cm := &c.ConfigMaps[i]
		if cm.Namespace != c.Namespace || cm.Labels[LabelExclusionList] != "true" {
			continue
		}
		obj := "configmap/" + cm.Namespace + "/" + cm.Name
		list, err := exclusionlist.ReadConfigMap(cm.Data, cm.BinaryData)
		if err != nil {
			out = append(out, Finding{Severity: Blocking, Area: "exclusions", Object: obj,
				What: fmt.Sprintf("every node's worker fails on this list and removes nothing, as upstream's did: %v", err)})
			continue
		}
		for _, n := range list.Notes {
			out = append(out, Finding{Severity: Difference, Area: "exclusions", Object: obj, What: n.String()})
		}
	}
	return out
}

// imageListFindings: lists upstream ignored, and "*", whose meaning grew.
func imageListFindings(c Cluster) []Finding {
	var out []Finding
	for i := range c.ImageLists {
		l := &c.ImageLists[i]
		obj := "imagelist/" + l.Name
		if l.Name != UpstreamImageList {
			out = append(out, Finding{Severity: Difference, Area: "imagelist", Object: obj,
				What: "upstream ignored every ImageList not named imagelist; this Eraser runs any name: this list, there before the install, is taken over without a run and runs on its next edit or `kubectl eraser run imagelist/" + l.Name + "`"})
		}
		if slices.Contains(l.Spec.Images, "*") {
			out = append(out, Finding{Severity: Difference, Area: "imagelist", Object: obj,
				What: `"*" keeps images pulled less than manager.retention.minAge ago, images workloads reference and images that cannot be pulled again (upstream removed every unused image)`})
		}
	}
	return out
}
