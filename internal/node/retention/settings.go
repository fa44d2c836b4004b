// Package retention decides, among the images the protections leave
// removable on a node (the candidates), which to remove and why: named by an
// ImageList, unused ("*"), vulnerable, unused for long enough, superseded by
// newer versions of its repository, or to relieve disk pressure; and, for
// each candidate kept, why. The automatic policies learn from what came
// back: an image pulled again after a removal is held for a cool-down, and
// their choices go in order of expected cost (Score). See docs/retention.md.
//
// The decision is a pure function of the candidates, their ages and last
// use, the settings and the image filesystem's usage, so that a dry run
// gives exactly the plan a real run follows.
package retention

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/eraser-oss/eraser/internal/node/nodestate"
	"github.com/eraser-oss/eraser/internal/wire/workerdefaults"
)

// Policy is why an image was chosen. The strings are the ImageJob API's
// RemovalPolicy values; this package does not import the API so that the
// workers stay small.
type Policy string

// The policies, in the order an image chosen by several is counted under.
const (
	Listed       Policy = "Listed"
	Unused       Policy = "Unused"
	Vulnerable   Policy = "Vulnerable"
	UnusedFor    Policy = "UnusedFor"
	Superseded   Policy = "Superseded"
	DiskPressure Policy = "DiskPressure"
)

// Policies lists every policy in that order.
var Policies = []Policy{Listed, Unused, Vulnerable, UnusedFor, Superseded, DiskPressure}

// MaxHold caps the cool-down, however often an image came back: an image
// pulled again every week is still judged monthly.
const MaxHold = 30 * 24 * time.Hour

// Settings are the retention policy of a run.
type Settings struct {
	// MinAge: images pulled or re-tagged on the node more recently are never
	// removed, except when an ImageList names them (the keep rule
	// internal/node/protect applies; the policies here never see them).
	MinAge time.Duration
	// UnusedFor, when positive, removes images no container used for this long.
	UnusedFor time.Duration
	// HighThresholdPercent, when positive, removes images, least recently
	// used first, while the image filesystem is at or above it, until it is
	// below LowThresholdPercent.
	HighThresholdPercent int
	LowThresholdPercent  int
	// KeepVersions, when positive, removes in scheduled runs the images
	// with at least this many newer versions of their repository on the
	// node (Standings).
	KeepVersions int
	// CoolDown holds an image that came back after a removal from every
	// automatic policy: CoolDown after its first return, doubling with
	// each further one, at most MaxHold (Hold). 0: off.
	CoolDown time.Duration
}

// DiskPressure reports whether the disk-pressure policy is on.
func (s Settings) DiskPressure() bool { return s.HighThresholdPercent > 0 }

// Choosing reports whether a policy besides the scanner's chooses images
// in a scheduled run; without one, such a run removes every candidate.
func (s Settings) Choosing() bool {
	return s.UnusedFor > 0 || s.DiskPressure() || s.KeepVersions > 0
}

// Hold is how long an image that came back returns times is held from the
// automatic policies after its last return: CoolDown*2^(returns-1), at
// most MaxHold; 0 when it never came back or the cool-down is off.
func (s Settings) Hold(returns int) time.Duration {
	if returns < 1 || s.CoolDown <= 0 {
		return 0
	}
	h := s.CoolDown
	for range returns - 1 {
		if h >= MaxHold {
			break
		}
		h *= 2
	}
	return min(h, MaxHold)
}

// Validate checks the settings, naming the flag of each problem.
func (s Settings) Validate() error {
	var errs []error
	if s.MinAge < 0 {
		errs = append(errs, fmt.Errorf("--min-age: must not be negative, got %v", s.MinAge))
	}
	if s.UnusedFor < 0 {
		errs = append(errs, fmt.Errorf("--unused-for: must not be negative, got %v", s.UnusedFor))
	}
	if s.KeepVersions < 0 {
		errs = append(errs, fmt.Errorf("--keep-versions: must not be negative, got %d", s.KeepVersions))
	}
	if s.CoolDown < 0 {
		errs = append(errs, fmt.Errorf("--cool-down: must not be negative, got %v", s.CoolDown))
	}
	hi, lo := s.HighThresholdPercent, s.LowThresholdPercent
	switch {
	case hi == 0 && lo == 0:
	case hi == 0 || lo == 0:
		errs = append(errs, errors.New("--high-threshold-percent and --low-threshold-percent: set both or neither"))
	case hi < 1 || hi > 100 || lo < 1 || lo > 100:
		errs = append(errs, fmt.Errorf("--high-threshold-percent and --low-threshold-percent: must be in 1..100, got %d and %d", hi, lo))
	case lo >= hi:
		errs = append(errs, fmt.Errorf("--low-threshold-percent (%d) must be below --high-threshold-percent (%d)", lo, hi))
	}
	return errors.Join(errs...)
}

// Flags are the retention flags the collector, the remover and "eraser node
// prune" share.
type Flags struct {
	Settings
	// StateDir holds the node's state file (last use, first sight).
	StateDir string
	// StateLockWait bounds the wait for another worker's lock on the
	// state file (nodestate.DefaultLockWait says why its default).
	StateLockWait time.Duration
	// ImageFsPath is where the image filesystem is statted; empty: the
	// mount point the runtime reports.
	ImageFsPath string
	// ImageStore is a containers/storage root (CRI-O's) to read image
	// ages from when the runtime's API has none; "" for none.
	ImageStore string
	// Now pins the clock for ages ("" = the real clock).
	Now string
}

// Bind registers the flags with the defaults given.
func (f *Flags) Bind(fs *flag.FlagSet, stateDir string) {
	fs.DurationVar(&f.MinAge, "min-age", workerdefaults.MinAge, "never remove an image pulled or re-tagged on the node less than this ago, unless an ImageList names it")
	fs.DurationVar(&f.UnusedFor, "unused-for", 0, "remove images no container used for this long (0: off)")
	fs.IntVar(&f.HighThresholdPercent, "high-threshold-percent", 0, "remove least recently used images while the image filesystem is at or above this percent (0: off)")
	fs.IntVar(&f.LowThresholdPercent, "low-threshold-percent", 0, "...until it is below this percent")
	fs.IntVar(&f.KeepVersions, "keep-versions", 0, "in scheduled runs, remove the images of a repository but the newest this many on the node (0: off)")
	fs.DurationVar(&f.CoolDown, "cool-down", workerdefaults.CoolDown, "hold an image that came back after a removal from the automatic policies this long, doubled at each further return, at most 30 days (0: off)")
	fs.StringVar(&f.StateDir, "state-dir", stateDir, "directory of the node's image state file (first seen, last used)")
	fs.DurationVar(&f.StateLockWait, "state-lock-wait", nodestate.DefaultLockWait, "how long to wait for another Eraser worker on the node to release the state file's lock before failing")
	fs.StringVar(&f.ImageFsPath, "imagefs-path", "", "path on the image filesystem to measure it at (empty: the mount point the runtime reports)")
	fs.StringVar(&f.ImageStore, "image-store", "", "CRI-O's image store (containers/storage root), read for when each image was pulled; empty: the runtime's API only")
	fs.StringVar(&f.Now, "now", "", "RFC 3339 time to take as now for ages (tests, what-if runs); empty: the clock")
}

// Clock returns the time to judge ages at.
func (f *Flags) Clock() (time.Time, error) {
	if f.Now == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339, f.Now)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now: %w", err)
	}
	return t, nil
}
