package config

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/scanconfig"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// ScanSlack is what a scanning run needs beyond the scanner's own deadline:
// the collector's listing before the scanner reads it, then the removals
// and the completion signals after the scanner has handed its list on.
const ScanSlack = 30 * time.Minute

// Waits are the bounds of one kind of job's waits, derived from the
// configuration so that no wait ends a run that the configuration allows
// to go on.
type Waits struct {
	// Handoff bounds each wait of a worker for a peer in its pod (the
	// collector's and the remover's --handoff-timeout).
	Handoff time.Duration
	// PodRun is the run timeout the job's pods get.
	PodRun time.Duration
	// ScanDeadline is when, after the pod starts, the scanner is done by
	// its configuration: the DB download, then timeout.total. Zero when
	// the job does not scan, or its scan has no total deadline.
	ScanDeadline time.Duration
	// Raised says that PodRun is longer than podRunTimeout: the configured
	// one would end the pods before the scanner's own deadline.
	Raised bool
}

// WaitsFor derives the waits of a job: scheduled or not (an ImageList's
// job runs the remover alone), with the scanner whose configuration is sc,
// nil when the job does not scan or its scanner's deadline is unknown (a
// custom scanner's configuration is its own).
//
// Scanning, the remover waits for the scanner's list and the collector for
// the remover's signal through the whole scan, so both wait the scan
// deadline plus ScanSlack; before, they were capped at an hour whatever
// timeout.total said. With an unknown deadline, or timeout.total 0 (no
// total), the pod's run timeout is the only bound. The pod's run timeout is
// raised to the scan deadline plus ScanSlack when podRunTimeout is shorter:
// the scanner's own deadline is upstream's setting for how long a scan may
// take (timeout.total, 23h by default), and an upstream configuration with
// a longer one must keep working; upstream had no run timeout at all.
func WaitsFor(podRunTimeout time.Duration, scheduled, scanning bool, sc *scanconfig.Config) Waits {
	w := Waits{Handoff: workerdefaults.HandoffTimeout, PodRun: podRunTimeout}
	if !scheduled || !scanning {
		return w
	}
	if sc == nil || sc.Timeout.Total.Duration <= 0 {
		w.Handoff = podRunTimeout
		return w
	}
	w.ScanDeadline = sc.DBDownloadTimeout.Duration + sc.Timeout.Total.Duration
	need := w.ScanDeadline + ScanSlack
	w.Handoff = need
	if podRunTimeout < need {
		w.PodRun, w.Raised = need, true
	}
	return w
}

// Waits are the waits of a job of this configuration, scheduled or not.
func (c *Config) Waits(scheduled bool) Waits {
	return WaitsFor(c.Manager.ImageJob.PodRunTimeout, scheduled, c.Components.Collector.Enabled && c.Components.Scanner.Enabled, c.Components.Scanner.Trivy)
}

// runTimeout tells, at load, about a podRunTimeout that scheduled runs'
// pods would outlive: a warning rather than a refusal, because the default
// podRunTimeout applies to upstream's documents too, which never set it
// and may well scan for longer than a day.
func (c *converter) runTimeout() {
	w := c.cfg.Waits(true)
	if !w.Raised {
		return
	}
	c.warn(field.NewPath("manager", "imageJob", "podRunTimeout"), fmt.Sprintf(
		"%v is shorter than the scanner's deadline (dbDownloadTimeout plus timeout.total in components.scanner.config: %v) plus %v for listing and removal: "+
			"scheduled runs' pods get %v; lower timeout.total to end scheduled runs sooner",
		c.cfg.Manager.ImageJob.PodRunTimeout, w.ScanDeadline, ScanSlack, w.PodRun))
}
