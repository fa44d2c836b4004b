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

	// Repository is the image's repository, where it stands among the
	// node's versions (Standings); "" when it is in none, or when the run
	// does not rank versions (keepVersions off).
	Repository string
	// OwnBytes is what only this image holds: what its removal frees.
	// 0: not known, its Size is taken instead (the remover does not read
	// the runtime's records before it plans, so it leaves this 0).
	OwnBytes uint64
	// Returns counts how often the image came back after a removal on the
	// node; LastReturned is when it last did.
	Returns      int
	LastReturned time.Time
	// Newer counts the versions of its repository on the node that are
	// newer (Standings).
	Newer int
}

// Own is the bytes its removal frees: OwnBytes, or the Size when unknown.
func (c Candidate) Own() uint64 {
	if c.OwnBytes > 0 {
		return c.OwnBytes
	}
	return c.Size
}

// coolingUntil is when the candidate's hold ends; zero when it has none.
func (c Candidate) coolingUntil(s Settings) time.Time {
	h := s.Hold(c.Returns)
	if h == 0 || c.LastReturned.IsZero() {
		return time.Time{}
	}
	return c.LastReturned.Add(h)
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
// candidates' order, except the automatic policies' choices (Unused,
// UnusedFor, Superseded, then DiskPressure's), which come after the others
// in the order of Score, best first; removals should follow the returned
// order.
//
// A candidate that came back after a removal and is within its hold
// (Settings.Hold) is kept as cooling down from every policy but Listed:
// the user asked for a listed image, the other policies guessed.
func Choose(in Input, cands []Candidate) []Decision {
	s := in.Settings
	out := make([]Decision, 0, len(cands))
	var auto []scored
	var freed uint64
	var forDisk []Candidate
	diskOn := in.Scheduled && s.DiskPressure()
	unusedForOn := in.Scheduled && s.UnusedFor > 0
	versionsOn := in.Scheduled && s.KeepVersions > 0
	for _, c := range cands {
		d := Decision{Index: c.Index}
		switch {
		case c.Listed:
			d.Policy = Listed
		case !considered(in, c, diskOn || unusedForOn || versionsOn):
		case in.Sweep:
			d.Policy = Unused
		case c.Vulnerable:
			d.Policy = Vulnerable
		case unusedForOn && in.Now.Sub(c.Idle()) >= s.UnusedFor:
			d.Policy = UnusedFor
			d.Detail = "unused for " + Ago(in.Now, c.Idle())
		case versionsOn && c.Newer >= s.KeepVersions:
			d.Policy = Superseded
			d.Detail = superseded(c)
		case diskOn:
			if cooling(in, c, &d) {
				break
			}
			forDisk = append(forDisk, c)
			continue
		case unusedForOn:
			d.Kept = workerresult.RecentlyUsed
			d.Detail = fmt.Sprintf("last needed %s ago, within %s", Ago(in.Now, c.Idle()), s.UnusedFor)
		case versionsOn:
			d.Kept = workerresult.NotNeeded
			d.Detail = newest(c, s.KeepVersions)
		}
		if d.Policy != "" && d.Policy != Listed && cooling(in, c, &d) {
			d.Policy = ""
		}
		switch d.Policy {
		case "":
		case Unused, UnusedFor, Superseded:
			freed += c.Size
			auto = append(auto, scored{d, c, Score(in.Now, c)})
			continue
		default:
			freed += c.Size
		}
		out = append(out, d)
	}
	out = append(out, byScore(auto)...)
	if len(forDisk) > 0 {
		out = append(out, planDisk(in, forDisk, freed, unusedForOn)...)
	}
	return out
}

// cooling keeps the candidate as cooling down, when it is within its hold.
func cooling(in Input, c Candidate, d *Decision) bool {
	until := c.coolingUntil(in.Settings)
	if !in.Now.Before(until) {
		return false
	}
	times := "once"
	if c.Returns > 1 {
		times = fmt.Sprintf("%d times", c.Returns)
	}
	d.Kept = workerresult.CoolingDown
	d.Detail = fmt.Sprintf("came back %s after a removal, last %s ago; held until %s", times, Ago(in.Now, c.LastReturned), until.UTC().Format(time.RFC3339))
	return true
}

func superseded(c Candidate) string {
	return fmt.Sprintf("%d newer versions of %s on the node", c.Newer, c.Repository)
}

func newest(c Candidate, keep int) string {
	if c.Repository == "" {
		return "in no repository: no version supersedes it"
	}
	return fmt.Sprintf("among the %d newest versions of %s on the node (%d newer)", keep, c.Repository, c.Newer)
}

// considered reports whether any policy of the run looks at the candidate:
// a scanner-only run considers only what the scanner handed over.
func considered(in Input, c Candidate, choosing bool) bool {
	return in.Sweep || c.Vulnerable || choosing
}

// Score is the expected-cost order of the automatic policies: the bytes
// only the candidate holds (Own) per the expected cost of pulling it back.
// That cost grows with each time it came back after a removal, and with
// how recently it was needed (last use, or arrival when later):
//
//	score = own / ((1 + returns) × (1 + 1 day / (idle + 1 minute)))
//
// An image idle for a month weighs about its bytes; one needed an hour ago
// about a 25th of them; one that came back twice a third of that. Higher
// scores go first.
func Score(now time.Time, c Candidate) float64 {
	idle := max(now.Sub(c.recency()), 0)
	recency := 1 + float64(24*time.Hour)/float64(idle+time.Minute)
	return float64(c.Own()) / (float64(1+c.Returns) * recency)
}

type scored struct {
	d     Decision
	c     Candidate
	score float64
}

// compareScored orders best score first; ties: least recently needed,
// then most own bytes, then the caller's index.
func compareScored(a, b scored) int {
	return cmp.Or(cmp.Compare(b.score, a.score), a.c.recency().Compare(b.c.recency()),
		cmp.Compare(b.c.Own(), a.c.Own()), cmp.Compare(a.c.Index, b.c.Index))
}

func byScore(ss []scored) []Decision {
	slices.SortFunc(ss, compareScored)
	out := make([]Decision, len(ss))
	for i, x := range ss {
		out[i] = x.d
	}
	return out
}

// planDisk chooses, best Score first, until the estimate falls below the
// low threshold. freed is what the other policies already free.
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
	ss := make([]scored, len(cands))
	for i, c := range cands {
		ss[i] = scored{c: c, score: Score(in.Now, c)}
	}
	slices.SortFunc(ss, compareScored)
	for i, x := range ss {
		cands[i] = x.c
	}
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
