package retention

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Candidate is one image the protections leave removable.
type Candidate struct {
	// Index is the caller's index of the image.
	Index int
	// Size is the image's size as the runtime reports it.
	Size uint64
	// Arrived is when the image was pulled or last re-tagged on the node
	// (or first seen there, when the runtime does not say).
	Arrived time.Time
	// LastUsed is when a container was last seen using it; zero: never.
	LastUsed time.Time
	// FirstSeen is when the node's state first saw the image: before it,
	// nothing is known of the image's use.
	FirstSeen time.Time
	// Listed: an ImageList entry names the image.
	Listed bool
	// Vulnerable: the scanner handed the image over.
	Vulnerable bool
}

// Idle is since when the image is known to be unused: the latest of its
// last use, its arrival (an image pulled yesterday has not been unused for
// longer than a day) and the first sight of it (use before that is
// unknown, so a node with no history starts its clock at its first run).
func (c Candidate) Idle() time.Time {
	return latest(c.LastUsed, c.Arrived, c.FirstSeen)
}

// recency orders the disk policy's choice: the last use, or the arrival.
// The first sight does not count: it would make every image of a node new
// to Eraser equally recent.
func (c Candidate) recency() time.Time { return latest(c.LastUsed, c.Arrived) }

func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// Disk is the image filesystem's usage in bytes.
type Disk struct {
	Capacity, Available uint64
}

// Used is what the kubelet counts as used: capacity less available.
func (d Disk) Used() uint64 { return d.Capacity - min(d.Available, d.Capacity) }

// Percent is the used share of the capacity.
func (d Disk) Percent() float64 {
	if d.Capacity == 0 {
		return 0
	}
	return float64(d.Used()) * 100 / float64(d.Capacity)
}

// Input is one node's run.
type Input struct {
	Now      time.Time
	Settings Settings
	// Sweep removes every candidate old enough (policy Unused): an
	// ImageList "*", or a scheduled run with no scanner and no policy of
	// its own.
	Sweep bool
	// Scheduled applies the settings' UnusedFor and disk-pressure policies.
	Scheduled bool
	// Disk is the image filesystem before the run; nil when the disk
	// policy is off or unmeasured.
	Disk *Disk
}

// Decision is what happens to one candidate.
type Decision struct {
	Index int
	// Policy chose the image for removal; empty when it is kept.
	Policy Policy
	// Kept says why it is kept, when no policy chose it and a policy that
	// considered it declined (RecentlyUsed, NotNeeded); empty for a
	// candidate nothing considered (a scanner run's images the scanner did
	// not hand over). The rules that keep an image whatever the policies
	// say, too young among them, are protect's, applied before a candidate
	// gets here.
	Kept   workerresult.Outcome
	Detail string
}

// Choose decides for every candidate. Decisions come back in the
// candidates' order, except that the disk policy's choices are in the order
// it made them (least recently used first); removals should follow the
// returned order.
func Choose(in Input, cands []Candidate) []Decision {
	s := in.Settings
	out := make([]Decision, 0, len(cands))
	var freed uint64
	var forDisk []Candidate
	diskOn := in.Scheduled && s.DiskPressure()
	unusedForOn := in.Scheduled && s.UnusedFor > 0
	for _, c := range cands {
		d := Decision{Index: c.Index}
		switch {
		case c.Listed:
			d.Policy = Listed
		case !considered(in, c, diskOn, unusedForOn):
		case in.Sweep:
			d.Policy = Unused
		case c.Vulnerable:
			d.Policy = Vulnerable
		case unusedForOn && in.Now.Sub(c.Idle()) >= s.UnusedFor:
			d.Policy = UnusedFor
			d.Detail = "unused for " + Ago(in.Now, c.Idle())
		case diskOn:
			forDisk = append(forDisk, c)
			continue
		case unusedForOn:
			d.Kept = workerresult.RecentlyUsed
			d.Detail = fmt.Sprintf("last needed %s ago, within %s", Ago(in.Now, c.Idle()), s.UnusedFor)
		}
		if d.Policy != "" {
			freed += c.Size
		}
		out = append(out, d)
	}
	if len(forDisk) > 0 {
		out = append(out, planDisk(in, forDisk, freed, unusedForOn)...)
	}
	return out
}

// considered reports whether any policy of the run looks at the candidate:
// a scanner-only run considers only what the scanner handed over.
func considered(in Input, c Candidate, diskOn, unusedForOn bool) bool {
	return in.Sweep || c.Vulnerable || diskOn || unusedForOn
}

// planDisk chooses, least recently used first, until the estimate falls
// below the low threshold. freed is what the other policies already free.
func planDisk(in Input, cands []Candidate, freed uint64, unusedForOn bool) []Decision {
	s := in.Settings
	keep := func(c Candidate, detail string) Decision {
		d := Decision{Index: c.Index, Kept: workerresult.NotNeeded, Detail: detail}
		if unusedForOn {
			d.Kept = workerresult.RecentlyUsed
			d.Detail = fmt.Sprintf("last needed %s ago, within %s; %s", Ago(in.Now, c.Idle()), s.UnusedFor, detail)
		}
		return d
	}
	out := make([]Decision, 0, len(cands))
	if in.Disk == nil || in.Disk.Capacity == 0 {
		for _, c := range cands {
			out = append(out, keep(c, "image filesystem not measured"))
		}
		return out
	}
	pct := in.Disk.Percent()
	if pct < float64(s.HighThresholdPercent) {
		detail := fmt.Sprintf("image filesystem at %.1f%%, below the high threshold %d%%", pct, s.HighThresholdPercent)
		for _, c := range cands {
			out = append(out, keep(c, detail))
		}
		return out
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		if c := a.recency().Compare(b.recency()); c != 0 {
			return c
		}
		return cmp.Compare(b.Size, a.Size)
	})
	target := s.Target(*in.Disk)
	used := in.Disk.Used() - min(freed, in.Disk.Used())
	for _, c := range cands {
		if used < target {
			out = append(out, keep(c, fmt.Sprintf("enough space freed: about %.1f%% after the removals before it, below the low threshold %d%%",
				float64(used)*100/float64(in.Disk.Capacity), s.LowThresholdPercent)))
			continue
		}
		out = append(out, Decision{Index: c.Index, Policy: DiskPressure,
			Detail: fmt.Sprintf("image filesystem at %.1f%%; last needed %s ago", pct, Ago(in.Now, c.recency()))})
		used -= min(c.Size, used)
	}
	return out
}

// Ago is a duration for people: whole seconds, or whole days past three.
func Ago(now, then time.Time) string {
	d := now.Sub(then)
	if d >= 72*time.Hour {
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	return d.Round(time.Second).String()
}

// Target is the used bytes the disk policy brings the filesystem under:
// strictly below LowThresholdPercent of its capacity.
func (s Settings) Target(d Disk) uint64 {
	return d.Capacity * uint64(s.LowThresholdPercent) / 100
}
