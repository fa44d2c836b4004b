package config

import (
	"fmt"
	"path"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/images"
	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
)

// IsTrivyScanner tells whether the scanner image is the Trivy scanner, whose
// configuration schema and limits this package knows; a custom scanner's
// are its own.
func IsTrivyScanner(c Component) bool {
	// The last element of the repository is upstream's and this
	// project's alike.
	return path.Base(c.Image.Repo) == images.Scanner.Repo
}

// scannerRuntime decides a runtime the scanner cannot read. The Trivy
// scanner reads images from containerd's content store and from CRI-O's
// image store; with cri-dockerd every scheduled run would fail on every
// node, every night. Refusing the configuration says so when it is written
// instead: on a live edit the previous configuration stays (InvalidConfig),
// at start-up the manager exits naming this field (or starts with the last
// good configuration on record). It applies only when scheduled runs scan
// (the scanner runs nowhere else) and to the Trivy scanner image only: a
// custom scanner may read any runtime.
//
// Running without the scanner instead would turn "remove vulnerable images"
// into "remove every unused image" behind the user's back, which cannot be
// undone for images that cannot be pulled again.
func scannerRuntime(rt RuntimeName, comps Components) *field.Error {
	if rt == RuntimeContainerd || rt == RuntimeCrio || !comps.Collector.Enabled || !comps.Scanner.Enabled || !IsTrivyScanner(comps.Scanner) {
		return nil
	}
	return field.Invalid(field.NewPath("components", "scanner", "enabled"), true, fmt.Sprintf(
		"the Trivy scanner reads images from containerd and CRI-O only, and manager.runtime is %s: every scheduled run would fail on every node. "+
			"Set components.scanner.enabled: false (scheduled runs then remove every unused image that is not excluded) or set components.scanner.image to a scanner that reads %s",
		rt, rt))
}

// scannerConfig checks the Trivy scanner's configuration when the manager
// loads it, so that a value the scanner would refuse on every node is
// refused once, with its path, and its warnings are seen where the
// configuration is edited. While no scheduled run scans, the document is
// not used, as upstream never read it then: what the scanner would refuse
// is only a warning until scanning is turned on. The parsed document is
// kept in scanner.Trivy for what the manager derives from it.
func (c *converter) scannerConfig(p *field.Path, scanner *Component, collecting bool) {
	if !IsTrivyScanner(*scanner) {
		return
	}
	sc, warnings, err := scanconfig.Parse(scanner.Config)
	for _, w := range warnings {
		c.warn(p, w)
	}
	switch {
	case err == nil:
		scanner.Trivy = &sc
	case collecting && scanner.Enabled:
		c.errs = append(c.errs, field.Invalid(p, field.OmitValueType{}, err.Error()))
	default:
		c.warn(p, "not used while scheduled runs do not scan; the scanner would refuse it: "+err.Error())
	}
}
