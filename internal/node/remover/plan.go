// Package remover removes images from a node through CRI: the targets an
// ImageList names (or "*" for every unused image), or the images a collector
// or scanner handed over. Whatever the targets, it never removes an image
// that protect says to keep, and it checks again, right before each removal,
// that no container has started using the image in the meantime.
package remover

import (
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/protect"
	"github.com/eraser-oss/eraser/internal/node/regret"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/imageref"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Targets are what to remove.
type Targets struct {
	// All selects every unprotected image old enough ("*").
	All bool
	// Refs are the explicit entries, parsed: the Listed policy.
	Refs []imageref.Ref
	// Entries are the entries as written, parallel to Refs.
	Entries []string

	// Scheduled marks a scheduled run's hand-off: the retention policies
	// choose among the images the collector listed.
	Scheduled bool
	// Collected are the image IDs the collector listed.
	Collected []string
	// Handed are what the collector or the scanner handed over, as image
	// IDs or digests; Scanned says the scanner chose them (Vulnerable).
	Handed  []imageref.Ref
	Scanned bool
}

// ParseTargets reads ImageList entries. Entries that are not references are
// returned as Invalid results; the others still run.
func ParseTargets(entries []string) (Targets, []Result) {
	var t Targets
	var invalid []Result
	for _, e := range entries {
		if e == imageref.PruneAllEntry {
			t.All = true
			continue
		}
		r, err := imageref.Parse(e)
		if err != nil {
			invalid = append(invalid, Result{Target: e, Outcome: workerresult.Invalid, Detail: err.Error()})
			continue
		}
		t.Refs = append(t.Refs, r)
		t.Entries = append(t.Entries, e)
	}
	return t, invalid
}

// Result is the outcome for one target or image.
type Result struct {
	// Target is the entry as written, or the image ID for "*".
	Target string
	// ImageID and Names identify the image, when one matched.
	ImageID string
	Names   []string
	// Outcome is what happened to it (Refused: see judgeRemoval).
	Outcome workerresult.Outcome
	// Bytes is the image's size: freed when Removed.
	Bytes  uint64
	Detail string
	// Policy chose the image for removal (set when Removed, Refused or
	// Failed).
	Policy retention.Policy

	// attempted: the runtime was asked to remove the image, and answered
	// err; settle judges the outcome once every removal is answered.
	attempted bool
	err       error
}

// Snapshot is what the runtime reported, indexed by key. It is the
// remover's largest structure (tens of thousands of images on a busy node,
// under a 30Mi memory limit), so it keeps one index entry per distinct key
// and no per-image key lists: the few images re-checked before removal
// have their keys computed again.
type Snapshot struct {
	Images []cri.Image
	// byKey maps a key to the one image it names; the rare key naming
	// several images (a digest shared by two image IDs) is in shared.
	byKey    map[string]int32
	shared   map[string][]int
	used     protect.Containers
	inUse    []bool
	policy   protect.Policy
	verdicts []protect.Decision
	// referenced are the images the cluster's references name (Refer).
	referenced map[int32]protect.Referrer
	// SandboxGuessed: no source named the sandbox image, so images that
	// look like pause images were kept; SandboxNote says why.
	SandboxGuessed bool
	SandboxNote    string
	// ledger is the node's removal ledger as this reading left it (nil:
	// no state is kept); Returned are the returns this reading counted.
	ledger   *regret.Ledger
	Returned []regret.Return
}

// NewSnapshot indexes the node's images and decides, once, which are protected.
func NewSnapshot(images []cri.Image, containers []cri.Container, policy protect.Policy) *Snapshot {
	policy = policy.Prepare()
	s := &Snapshot{Images: images, byKey: make(map[string]int32, 4*len(images)), shared: map[string][]int{},
		used: protect.NewContainers(containers), policy: policy}
	s.verdicts = make([]protect.Decision, len(images))
	s.inUse = make([]bool, len(images))
	for i, img := range images {
		keys := internKeys(img, protect.Keys(img))
		for _, k := range keys {
			s.index(k, i)
		}
		s.verdicts[i] = policy.Check(img, keys, s.used)
		s.inUse[i] = s.used.UseAny(keys)
	}
	return s
}

// index adds key k for image i.
func (s *Snapshot) index(k string, i int) {
	first, ok := s.byKey[k]
	switch {
	case !ok:
		s.byKey[k] = int32(i)
	case int(first) == i:
	default:
		if !slices.Contains(s.shared[k], i) {
			if len(s.shared[k]) == 0 {
				s.shared[k] = []int{int(first)}
			}
			s.shared[k] = append(s.shared[k], i)
		}
	}
}

// lookup is every image key k names.
func (s *Snapshot) lookup(k string) []int {
	if many, ok := s.shared[k]; ok {
		return many
	}
	if i, ok := s.byKey[k]; ok {
		return []int{int(i)}
	}
	return nil
}

// internKeys drops duplicate keys and, where a normalised key equals a
// name the runtime reported, uses the runtime's string, so that the index
// holds no second copy of it.
func internKeys(img cri.Image, keys []string) []string {
	out := keys[:0]
	for _, k := range keys {
		if slices.Contains(out, k) {
			continue
		}
		out = append(out, intern(img, k))
	}
	return out
}

// intern returns k as the runtime's own string, or a part of one, when it
// is one: a bare digest is the tail of a repo digest. A key built by
// parsing would otherwise hold its whole parsed reference in memory.
func intern(img cri.Image, k string) string {
	if k == img.ID {
		return img.ID
	}
	if j := slices.Index(img.Tags, k); j >= 0 {
		return img.Tags[j]
	}
	for _, d := range img.Digests {
		if d == k {
			return d
		}
		if strings.HasSuffix(d, "@"+k) {
			return d[len(d)-len(k):]
		}
	}
	return strings.Clone(k)
}

// Verdict is the decision for image i.
func (s *Snapshot) Verdict(i int) protect.Decision { return s.verdicts[i] }

// InUse reports whether a container uses image i, whatever else protects it.
func (s *Snapshot) InUse(i int) bool { return s.inUse[i] }

// Removal is one image to remove, the entry that named it and the policy
// that chose it.
type Removal struct {
	Image  int
	Target string
	Policy retention.Policy
	Detail string
}

// Age is what is known of when an image arrived on the node and when a
// container last used it; see retention.Candidate.
type Age struct {
	Arrived, LastUsed, FirstSeen time.Time
	// Returns counts the times the image came back after a removal, by the
	// node's removal ledger (internal/node/regret); LastReturned is when it
	// last did (zero: never).
	Returns      int
	LastReturned time.Time
}

// Retention is what a plan is told besides the snapshot and its targets:
// the retention policy, the images' ages and the disk, and what the chain's
// cluster-aware rules are told.
type Retention struct {
	Settings retention.Settings
	Now      time.Time
	// Ages are per snapshot image; nil: every image is old and unused.
	Ages []Age
	// Disk is the image filesystem before the removals, when measured.
	Disk *retention.Disk
	// AgeSource is where Ages came from (NodeAges).
	AgeSource string
	// Cluster is what the automatic policies' cluster-aware rules are told.
	Cluster protect.Cluster
}

// Plan resolves targets against the snapshot in three steps, each
// another package's decision: protect's chain keeps what must stay (its
// rules of every removal were applied when the node was read, its
// automatic ones apply here to whatever an ImageList does not name); the
// retention policy chooses among what the chain leaves; Run then asks
// protect.UsedNow again right before each removal. Plan returns the images
// to remove (each once, however many entries name it), the results of
// every target or candidate that resolves to nothing to do, and the
// candidates the disk policy may still take in a later round.
func Plan(s *Snapshot, t Targets, r Retention) (remove []Removal, results []Result, spare []retention.Candidate) {
	// Per image, by index (slices, not maps: tens of thousands of images
	// under a 30Mi limit): whether considered, the entry that named it
	// (empty: its ID), and its position among the candidates.
	seen := make([]bool, len(s.Images))
	target := make([]string, len(s.Images))
	at := make([]int32, len(s.Images))
	var cands []retention.Candidate
	// keepVersions ranks every image of the node, not only the candidates.
	var ranks []retention.Standing
	if t.Scheduled && r.Settings.KeepVersions > 0 {
		ranks = standings(s, r.Ages)
	}
	// auto: an automatic policy judges every candidate ("*", or a scheduled
	// run with no scanner or with a policy of its own), not only the
	// scanner's choices.
	auto := t.All || (t.Scheduled && (!t.Scanned || r.Settings.Choosing()))
	// consider adds image i as a candidate, or its result when protect's
	// chain keeps it.
	consider := func(i int, entry string, listed, vulnerable bool) {
		if seen[i] {
			return
		}
		seen[i] = true
		img := s.Images[i]
		v := s.verdicts[i]
		if v.Reason == protect.Removable && !listed && (auto || vulnerable) {
			v = protect.Judge(r.subject(s, i, vulnerable), protect.Automatic)
		}
		if v.Reason != protect.Removable {
			results = append(results, Result{Target: entry, ImageID: img.ID, Names: img.Tags, Outcome: v.Reason, Bytes: img.Size, Detail: v.Detail})
			return
		}
		target[i] = entry
		at[i] = int32(len(cands))
		c := retention.Candidate{Index: i, Size: img.Size, Listed: listed, Vulnerable: vulnerable}
		if r.Ages != nil {
			c.Arrived, c.LastUsed, c.FirstSeen = r.Ages[i].Arrived, r.Ages[i].LastUsed, r.Ages[i].FirstSeen
			c.Returns, c.LastReturned = r.Ages[i].Returns, r.Ages[i].LastReturned
		}
		if ranks != nil {
			c.Repository, c.Newer = ranks[i].Repository, ranks[i].Newer
		}
		cands = append(cands, c)
	}
	for n, ref := range t.Refs {
		idx := s.lookup(ref.String())
		if len(idx) == 0 {
			results = append(results, Result{Target: t.Entries[n], Outcome: workerresult.NotOnNode})
			continue
		}
		for _, i := range idx {
			consider(i, t.Entries[n], true, false)
		}
	}
	if t.Scheduled && t.Scanned {
		for _, ref := range t.Handed {
			for _, i := range s.lookup(ref.String()) {
				consider(i, s.Images[i].ID, false, true)
			}
		}
	}
	switch {
	case t.All:
		for i := range s.Images {
			consider(i, s.Images[i].ID, false, false)
		}
	case t.Scheduled:
		// Only what the collector listed: an image pulled since is not the
		// scheduled run's to judge.
		for _, id := range t.Collected {
			for _, i := range s.lookup(id) {
				consider(i, s.Images[i].ID, false, false)
			}
		}
	}
	in := retention.Input{
		Now: r.Now, Settings: r.Settings, Disk: r.Disk, Scheduled: t.Scheduled,
		Sweep: t.All || (t.Scheduled && !t.Scanned && !r.Settings.Choosing()),
	}
	for _, d := range retention.Choose(in, cands) {
		img := s.Images[d.Index]
		switch {
		case d.Policy != "":
			remove = append(remove, Removal{Image: d.Index, Target: target[d.Index], Policy: d.Policy, Detail: d.Detail})
		case d.Kept != "":
			results = append(results, Result{Target: target[d.Index], ImageID: img.ID, Names: img.Tags, Outcome: d.Kept, Bytes: img.Size, Detail: d.Detail})
			// One cooling down is no later round's to take either.
			if in.Scheduled && r.Settings.DiskPressure() && d.Kept != workerresult.CoolingDown {
				spare = append(spare, cands[at[d.Index]])
			}
		}
	}
	return remove, results, spare
}

// Candidates are the unprotected images: what a collector hands on.
func (s *Snapshot) Candidates() []int {
	var out []int
	for i, v := range s.verdicts {
		if v.Reason == protect.Removable {
			out = append(out, i)
		}
	}
	return out
}
