package config

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// volumes checks a component's extra volumes as Kubernetes would: a bad or
// repeated name would make every pod that carries them invalid.
func (c *converter) volumes(p *field.Path, vols []corev1.Volume) {
	names := sets.New[string]()
	for i, v := range vols {
		vp := p.Index(i)
		switch {
		case v.Name == "":
			c.errs = append(c.errs, field.Required(vp.Child("name"), ""))
		case names.Has(v.Name):
			c.errs = append(c.errs, field.Duplicate(vp.Child("name"), v.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(v.Name) {
				c.errs = append(c.errs, field.Invalid(vp.Child("name"), v.Name, msg))
			}
		}
		names.Insert(v.Name)
		if v.HostPath == nil {
			c.warn(vp, "only hostPath volumes are mounted into the scanner; this one is ignored")
		}
	}
}

// scannerVolumes refuses the scanner volumes that would collide with the
// worker pod's own (paths): the API server refuses such a pod, so every
// scheduled run would fail on every node (PodsRefused). The scanner mounts
// each hostPath volume at its own path, so two of them at one path, or one
// at a path the pod mounts itself, collide as well. The check holds whether
// or not the scanner is enabled now: the configuration must not break the
// day it is.
func (c *converter) scannerVolumes(p *field.Path, vols []corev1.Volume) {
	mounted := map[string]bool{}
	for i, v := range vols {
		vp := p.Index(i)
		if why := podpaths.ReservedVolume(v.Name); why != "" {
			c.errs = append(c.errs, field.Invalid(vp.Child("name"), v.Name, why))
		}
		if v.HostPath == nil {
			continue
		}
		pp, at := vp.Child("hostPath", "path"), path.Clean(v.HostPath.Path)
		switch why := podpaths.ReservedScannerMount(at); {
		case why != "":
			c.errs = append(c.errs, field.Invalid(pp, v.HostPath.Path, why))
		case mounted[at]:
			c.errs = append(c.errs, field.Invalid(pp, v.HostPath.Path, "another scanner volume is mounted at this path, and a container mounts one volume at a path"))
		}
		mounted[at] = true
	}
}
