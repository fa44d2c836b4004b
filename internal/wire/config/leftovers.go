package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// Leftovers is what the removers do with what removals left on the
// runtime (docs/reclaim.md): they always look for it and report it; they
// delete the kinds in Reclaim.
type Leftovers struct {
	// Reclaim are the kinds of leftover deleted; empty: none.
	Reclaim []string
	// Namespaces are containerd's namespaces besides k8s.io where the
	// containerd kinds act: other-namespace deletes their images, old-lease
	// their forgotten pull and import leases. Any other namespace is
	// someone else's (Docker's moby, BuildKit's buildkit) and untouched.
	Namespaces []string
	// LeaseAge is the age past which a containerd lease holds a leftover;
	// 0: the workers' default (workerdefaults.LeaseAge).
	LeaseAge time.Duration
	// RecordAge is the age under which CRI-O's records are not judged;
	// 0: the workers' default (workerdefaults.RecordAge).
	RecordAge time.Duration
	// CRIORunRoot is CRI-O's run root on the nodes, which the removers
	// mount to reclaim CRI-O's kinds; empty: workerdefaults.CRIORunRoot.
	CRIORunRoot string
}

// ReclaimsOnCRIO says whether the removers delete CRI-O's leftovers: then
// they write to CRI-O's store.
func (l Leftovers) ReclaimsOnCRIO() bool {
	return slices.ContainsFunc(l.Reclaim, func(k string) bool { return slices.Contains(leftoverkind.CRIO, leftoverkind.Kind(k)) })
}

// RunRoot is CRI-O's run root the removers are told.
func (l Leftovers) RunRoot() string {
	if l.CRIORunRoot != "" {
		return l.CRIORunRoot
	}
	return workerdefaults.CRIORunRoot
}

type leftoversDoc struct {
	Reclaim     []string `json:"reclaim"`
	Namespaces  []string `json:"namespaces"`
	LeaseAge    scalar   `json:"leaseAge"`
	RecordAge   scalar   `json:"recordAge"`
	CRIORunRoot string   `json:"crioRunRoot"`
}

func (c *converter) leftovers(p *field.Path, d leftoversDoc) Leftovers {
	var out Leftovers
	for i, k := range d.Reclaim {
		switch {
		case !slices.Contains(leftoverkind.Reclaimable, leftoverkind.Kind(k)):
			c.errs = append(c.errs, field.NotSupported(p.Child("reclaim").Index(i), k, leftoverkind.Reclaimable))
		case !slices.Contains(out.Reclaim, k):
			out.Reclaim = append(out.Reclaim, k)
		}
	}
	for i, ns := range d.Namespaces {
		switch {
		case ns == "" || strings.ContainsAny(ns, ", /"):
			c.errs = append(c.errs, field.Invalid(p.Child("namespaces").Index(i), ns, "must be a containerd namespace name"))
		case ns == "k8s.io":
			c.errs = append(c.errs, field.Invalid(p.Child("namespaces").Index(i), ns, "is the kubelet's namespace, whose images the removals judge"))
		case !slices.Contains(out.Namespaces, ns):
			out.Namespaces = append(out.Namespaces, ns)
		}
	}
	if len(out.Namespaces) > 0 && !slices.Contains(out.Reclaim, "other-namespace") && !slices.Contains(out.Reclaim, "old-lease") {
		c.warn(p.Child("namespaces"), "has no effect unless reclaim lists other-namespace or old-lease")
	}
	if slices.Contains(out.Reclaim, "other-namespace") && len(out.Namespaces) == 0 {
		c.warn(p.Child("reclaim"), "other-namespace reclaims nothing until namespaces names one")
	}
	if d.LeaseAge != "" {
		if age := c.duration(p.Child("leaseAge"), d.LeaseAge, true); age > 0 && age < workerdefaults.MinLeaseAge {
			c.errs = append(c.errs, field.Invalid(p.Child("leaseAge"), string(d.LeaseAge), fmt.Sprintf("must be at least %s: a pull in progress holds a lease", workerdefaults.MinLeaseAge)))
		} else if age > 0 {
			out.LeaseAge = age
		}
	}
	if d.RecordAge != "" {
		if age := c.duration(p.Child("recordAge"), d.RecordAge, true); age > 0 && age < workerdefaults.MinRecordAge {
			c.errs = append(c.errs, field.Invalid(p.Child("recordAge"), string(d.RecordAge), fmt.Sprintf("must be at least %s: a pull in progress writes its layers before the image that holds them", workerdefaults.MinRecordAge)))
		} else if age > 0 {
			out.RecordAge = age
		}
	}
	if d.CRIORunRoot != "" {
		if why := runRootProblem(d.CRIORunRoot); why != "" {
			c.errs = append(c.errs, field.Invalid(p.Child("crioRunRoot"), d.CRIORunRoot, "must be CRI-O's run root (crio.conf's runroot): "+why))
		} else {
			out.CRIORunRoot = d.CRIORunRoot
		}
	}
	// The kinds of the other runtime reclaim nothing on these nodes.
	other := leftoverkind.CRIO
	if c.cfg.Manager.Runtime.Name == RuntimeCrio {
		other = leftoverkind.Containerd
	}
	for _, k := range out.Reclaim {
		if slices.Contains(other, leftoverkind.Kind(k)) {
			c.warn(p.Child("reclaim"), fmt.Sprintf("%s is not a leftover of %s nodes: it reclaims nothing there", k, c.cfg.Manager.Runtime.Name))
		}
	}
	return out
}

// runRootParents are where a run root lies: it holds what lasts until the
// node restarts, on the tmpfs under /run. The removers mount it writable,
// so no other host path may be named.
var runRootParents = []string{"/run/", "/var/run/"}

// runRootProblem says why p cannot be CRI-O's run root, or "".
func runRootProblem(p string) string {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "a clean absolute path"
	}
	if !slices.ContainsFunc(runRootParents, func(parent string) bool { return strings.HasPrefix(p, parent) }) {
		return "a directory under /run or /var/run"
	}
	return ""
}
