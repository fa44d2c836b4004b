// Package remover removes images from a node through CRI: the targets an
// ImageList names (or "*" for every unused image), or the images a collector
// or scanner handed over. Whatever the targets, it never removes an image
// that protect says to keep, and it checks again, right before each removal,
// that no container has started using the image in the meantime.
package remover

import (
	"slices"

	"github.com/eraser-oss/eraser/internal/cri"
	"github.com/eraser-oss/eraser/internal/imageref"
	"github.com/eraser-oss/eraser/internal/protect"
)

// Outcome is what happened to one target or image.
type Outcome string

// The outcomes, as they appear in logs and in the summary.
const (
	Removed   Outcome = "removed"
	InUse     Outcome = "in use"
	Pinned    Outcome = "pinned"
	Excluded  Outcome = "excluded"
	NotOnNode Outcome = "not on node"
	Failed    Outcome = "failed"
	// Invalid entries are not image references; nothing is removed for them.
	Invalid Outcome = "invalid"
)

// Outcomes lists every outcome in a stable order.
var Outcomes = []Outcome{Removed, InUse, Pinned, Excluded, NotOnNode, Failed, Invalid}

func outcomeOf(r protect.Reason) Outcome {
	switch r {
	case protect.InUse:
		return InUse
	case protect.Pinned:
		return Pinned
	case protect.Excluded:
		return Excluded
	}
	return Removed
}

// Targets are what to remove.
type Targets struct {
	// All selects every unprotected image ("*").
	All bool
	// Refs are the explicit entries, parsed.
	Refs []imageref.Ref
	// Entries are the entries as written, parallel to Refs.
	Entries []string
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
			invalid = append(invalid, Result{Target: e, Outcome: Invalid, Detail: err.Error()})
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
	Outcome Outcome
	// Bytes is the image's size: freed when Removed.
	Bytes  uint64
	Detail string
}

// Snapshot is what the runtime reported, indexed by key.
type Snapshot struct {
	Images   []cri.Image
	keys     [][]string
	byKey    map[string][]int
	used     protect.Containers
	policy   protect.Policy
	verdicts []protect.Verdict
	// SandboxGuessed: no source named the sandbox image, so images that
	// look like pause images were kept; SandboxNote says why.
	SandboxGuessed bool
	SandboxNote    string
}

// NewSnapshot indexes the node's images and decides, once, which are protected.
func NewSnapshot(images []cri.Image, containers []cri.Container, policy protect.Policy) *Snapshot {
	s := &Snapshot{Images: images, byKey: map[string][]int{}, used: protect.NewContainers(containers), policy: policy}
	s.keys = make([][]string, len(images))
	s.verdicts = make([]protect.Verdict, len(images))
	for i, img := range images {
		s.keys[i] = protect.Keys(img)
		for _, k := range s.keys[i] {
			if !slices.Contains(s.byKey[k], i) {
				s.byKey[k] = append(s.byKey[k], i)
			}
		}
		s.verdicts[i] = policy.Check(img, s.keys[i], s.used)
	}
	return s
}

// Verdict is the decision for image i.
func (s *Snapshot) Verdict(i int) protect.Verdict { return s.verdicts[i] }

// Removal is one image to remove and the entry that chose it.
type Removal struct {
	Image  int
	Target string
}

// Plan resolves targets against the snapshot. It returns the images to
// remove (each once, however many entries name it) and the results of every
// target that resolves to nothing to do.
func Plan(s *Snapshot, t Targets) (remove []Removal, results []Result) {
	chosen := map[int]bool{}
	var order []Removal
	choose := func(i int, target string) {
		if chosen[i] {
			return
		}
		chosen[i] = true
		if v := s.verdicts[i]; v.Reason != protect.Removable {
			img := s.Images[i]
			results = append(results, Result{Target: target, ImageID: img.ID, Names: img.Tags, Outcome: outcomeOf(v.Reason), Bytes: img.Size, Detail: v.Detail})
			return
		}
		order = append(order, Removal{Image: i, Target: target})
	}
	for n, r := range t.Refs {
		idx := s.byKey[r.String()]
		if len(idx) == 0 {
			results = append(results, Result{Target: t.Entries[n], Outcome: NotOnNode})
			continue
		}
		for _, i := range idx {
			choose(i, t.Entries[n])
		}
	}
	if t.All {
		for i := range s.Images {
			choose(i, s.Images[i].ID)
		}
	}
	return order, results
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
