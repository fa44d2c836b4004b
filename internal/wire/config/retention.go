package config

import (
	"fmt"
	"path"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// retention needs the runtime already converted: the image filesystem's
// default path is the runtime's.
func (c *converter) retention(p *field.Path, d retentionDoc) Retention {
	out := Retention{MinAge: c.duration(p.Child("minAge"), d.MinAge, true),
		IgnoreReferenced: !d.ProtectReferenced, KeepVulnerableReferenced: !d.RemoveVulnerableReferenced, RemoveNotRepullable: !d.ProtectNotRepullable}
	if !d.ProtectReferenced && !d.RemoveVulnerableReferenced {
		c.warn(p.Child("removeVulnerableReferenced"), "has no effect while protectReferenced is false")
	}
	out.RegistryCheck = c.registryCheck(p.Child("registryCheck"), d.RegistryCheck)
	if d.UnusedFor != "" {
		out.UnusedFor = c.duration(p.Child("unusedFor"), d.UnusedFor, true)
	}
	out.CoolDown = workerdefaults.CoolDown
	if d.CoolDown != "" {
		out.CoolDown = c.duration(p.Child("coolDown"), d.CoolDown, false)
	}
	if d.KeepVersions != "" {
		n, err := strconv.Atoi(string(d.KeepVersions))
		if err != nil || n < 0 || n > MaxKeepVersions {
			c.errs = append(c.errs, field.Invalid(p.Child("keepVersions"), string(d.KeepVersions), fmt.Sprintf("must be a whole number between 0 (off) and %d", MaxKeepVersions)))
		} else {
			out.KeepVersions = n
		}
	}
	high := c.percent(p.Child("highThresholdPercent"), d.HighThresholdPercent)
	low := c.percent(p.Child("lowThresholdPercent"), d.LowThresholdPercent)
	switch {
	case d.HighThresholdPercent != "" && d.LowThresholdPercent == "":
		c.errs = append(c.errs, field.Required(p.Child("lowThresholdPercent"), "set both thresholds or neither"))
	case d.LowThresholdPercent != "" && d.HighThresholdPercent == "":
		c.errs = append(c.errs, field.Required(p.Child("highThresholdPercent"), "set both thresholds or neither"))
	case high > 0 && low > 0 && low >= high:
		c.errs = append(c.errs, field.Invalid(p.Child("lowThresholdPercent"), low, fmt.Sprintf("must be below highThresholdPercent (%d)", high)))
	case high > 0 && low > 0:
		out.HighThresholdPercent, out.LowThresholdPercent = high, low
	}

	fs := p.Child("imageFsPath")
	switch {
	case d.ImageFsPath == "":
		out.ImageFsPath = defaultImageFsPaths[c.cfg.Manager.Runtime.Name]
	case !path.IsAbs(d.ImageFsPath):
		c.errs = append(c.errs, field.Invalid(fs, d.ImageFsPath, "must be an absolute path"))
	case path.Clean(d.ImageFsPath) == "/":
		// Mounted at its own path, it would hide the worker's root.
		c.errs = append(c.errs, field.Invalid(fs, d.ImageFsPath, "must be a directory below /, on the image filesystem"))
	default:
		out.ImageFsPath = path.Clean(d.ImageFsPath)
	}
	// On CRI-O it is also where the image store is read (pull times, the
	// scanner's images).
	if d.ImageFsPath != "" && d.HighThresholdPercent == "" && d.LowThresholdPercent == "" && c.cfg.Manager.Runtime.Name != RuntimeCrio {
		c.warn(fs, "has no effect unless highThresholdPercent and lowThresholdPercent are set")
	}
	return out
}

// percent reads a whole percent in 1..100; unset is 0.
func (c *converter) percent(p *field.Path, s scalar) int {
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(string(s))
	if err != nil || n < 1 || n > 100 {
		c.errs = append(c.errs, field.Invalid(p, string(s), "must be a whole percent between 1 and 100"))
		return 0
	}
	return n
}
