package migration

import (
	"fmt"
	"slices"

	"github.com/eraser-oss/eraser/internal/wire/exclusionlist"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/pause"
)

// Neutralise is what rollback --apply does to an object before upstream's
// manager starts: a step that keeps upstream from doing what this Eraser
// would not have done.
type Neutralise struct {
	// ImageList is the list to save and delete.
	ImageList string
	Why       string
}

// Rollback says what upstream Eraser's manager will do in the cluster once
// it replaces this one, and which objects to neutralise first.
//
// Upstream's CRD has no spec.dryRun (the API server drops the field), and
// its manager runs the ImageList named imagelist at its start when the
// list has no job of upstream's: a dry run here becomes a real removal
// there. Upstream's scheduled runs start by deleting every ImageJob, and
// with them, as their owner, the per-node reports. It ignores the pause,
// and the exclusion entries read here as globs protect nothing there.
func Rollback(c Cluster) ([]Finding, []Neutralise) {
	var out []Finding
	var todo []Neutralise
	for i := range c.ImageLists {
		l := &c.ImageLists[i]
		obj := "imagelist/" + l.Name
		switch {
		case l.Name == UpstreamImageList && l.Spec.DryRun:
			why := "a dry run here; upstream's CRD has no dryRun, and its manager runs this list at its start: its images would be removed for real"
			out = append(out, Finding{Severity: Blocking, Area: "rollback", Object: obj, What: why + " (rollback --apply saves and deletes it)"})
			todo = append(todo, Neutralise{ImageList: l.Name, Why: why})
		case l.Name == UpstreamImageList:
			what := "upstream's manager runs this list again at its start"
			if slices.Contains(l.Spec.Images, "*") {
				what += `, and "*" there removes every unused image, with none of this Eraser's retention (too young, referenced, not re-pullable)`
			}
			out = append(out, Finding{Severity: Difference, Area: "rollback", Object: obj, What: what})
		case l.Spec.DryRun:
			out = append(out, Finding{Severity: Difference, Area: "rollback", Object: obj,
				What: "a dry run here; upstream ignores this name, but renamed to imagelist under upstream it would run for real"})
		}
	}
	if c.ImageJobs > 0 {
		out = append(out, Finding{Severity: Difference, Area: "rollback", Object: "imagejobs",
			What: fmt.Sprintf("upstream's manager deletes every ImageJob when its scheduled runs start (%d here), and the garbage collector their %d report ConfigMaps: rollback --export-reports DIR saves them first", c.ImageJobs, c.Reports)})
	}
	if cm := c.configMap(pause.Name); cm != nil {
		out = append(out, Finding{Severity: Difference, Area: "rollback", Object: "configmap/" + cm.Namespace + "/" + cm.Name,
			What: "upstream ignores the pause: its runs start at once"})
	}
	for i := range c.ConfigMaps {
		cm := &c.ConfigMaps[i]
		if cm.Namespace != c.Namespace || cm.Labels[LabelExclusionList] != "true" {
			continue
		}
		list, err := exclusionlist.ReadConfigMap(cm.Data, cm.BinaryData)
		if err != nil {
			continue
		}
		for _, p := range list.Patterns {
			// What upstream matched as text, or as a prefix, it still
			// matches; a glob or a lone "*" it matched against nothing.
			if r := p.Legacy(); r == imageref.LegacyGlob || r == imageref.LegacyAll {
				out = append(out, Finding{Severity: Difference, Area: "rollback", Object: "configmap/" + cm.Namespace + "/" + cm.Name,
					What: fmt.Sprintf("entry %q protects nothing under upstream (%s)", p.String(), p.Legacy())})
			}
		}
	}
	Sort(out)
	return out, todo
}
