// Package workerresult is the summary a node worker leaves in its container's
// termination message, from which the manager reads a node's results
// through pod status, without any API access from the node.
package workerresult

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/eraser-oss/eraser/internal/util/bytesize"
	"github.com/eraser-oss/eraser/internal/util/textcut"
)

// MaxSize is the kubelet's limit on a termination message.
const MaxSize = 4096

// maxFailures and maxMessage keep the summary far below MaxSize.
const (
	maxFailures = 5
	maxMessage  = 200
)

// Summary is one worker's results on one node.
type Summary struct {
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	DryRun    bool   `json:"dryRun,omitempty"`
	// Counts holds the number of images per outcome ("removed", "in use",
	// "pinned", "excluded", "not on node", "refused", "failed", "invalid").
	Counts map[string]int `json:"counts"`
	// BytesFreed is the size of the images removed (would be, on a dry run).
	BytesFreed uint64 `json:"bytesFreed"`
	// Failures are the first few failures.
	Failures []Failure `json:"failures,omitempty"`
	// Refused are the first few images the runtime would not remove for
	// good: counted ("refused") and named, without failing the node.
	Refused []Failure `json:"refused,omitempty"`
	// Error is set when the worker failed: it could not run at all (exit
	// code 1), or removals failed (exit code 2: the count and the first).
	Error string `json:"error,omitempty"`
	// Verdicts are the scanner's per-image verdicts, as many as fit.
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// VerdictsOmitted counts the verdicts left out to stay under MaxSize.
	VerdictsOmitted int `json:"verdictsOmitted,omitempty"`
	// ScanDB is the vulnerability DB the scanner judged with.
	ScanDB *ScanDB `json:"scanDB,omitempty"`
	// ScansMade counts the images the scanner scanned on this node;
	// VerdictsShared those it judged by a verdict another node made.
	ScansMade      int `json:"scansMade,omitempty"`
	VerdictsShared int `json:"verdictsShared,omitempty"`
	// SandboxImageGuessed is set when neither the runtime's status nor its
	// pod sandboxes named a sandbox image, so every image that looks like a
	// pause image was kept (counted as "pinned").
	SandboxImageGuessed bool `json:"sandboxImageGuessed,omitempty"`
	// MaxRecheckWindowMs is the longest time, in milliseconds, from the
	// start of the container listing that cleared an image to the issue of
	// its removal.
	MaxRecheckWindowMs float64 `json:"maxRecheckWindowMs,omitempty"`
	// PeakRSSBytes is the worker's peak resident memory, where measured.
	PeakRSSBytes uint64 `json:"peakRssBytes,omitempty"`
	// RemovedBy totals the removed images (would be, on a dry run) by the
	// retention policy that chose each (retention.Policy).
	RemovedBy map[string]PolicyTotal `json:"removedBy,omitempty"`
	// ImageFs is the image filesystem before and after the run, when the
	// disk-pressure policy measured it.
	ImageFs *ImageFs `json:"imageFs,omitempty"`
	// Freed is what the removals should have freed and what they did.
	Freed *Freed `json:"freed,omitempty"`
	// Leftovers is what removals left on the runtime, found after this
	// run's removals, and what of it the policy reclaimed.
	Leftovers *Leftovers `json:"leftovers,omitempty"`
	// PlanMs is the time, in milliseconds, the remover spent deciding:
	// reading ages and the node's state file, and planning.
	PlanMs float64 `json:"planMs,omitempty"`
	// RegistryChecks are the registry's answers for the images an
	// automatic policy chose that a workload may need again.
	RegistryChecks *RegistryChecks `json:"registryChecks,omitempty"`
	// AgeSource says where image ages came from: "runtime" (the runtime's
	// image records) or "first seen" (the node's state file, when the
	// runtime does not record when it pulled an image).
	AgeSource string `json:"ageSource,omitempty"`
	// Regret is what came back of earlier removals, by the node's removal
	// ledger: the returns no report told before this one.
	Regret *Regret `json:"regret,omitempty"`
}

// Regret is the images that came back to a node after Eraser removed them:
// each return is told once, by the first remover (or "eraser node prune")
// after a worker saw it.
type Regret struct {
	// Returns counts the images that came back; BytesReturned is what
	// their removals had freed, pulled back.
	Returns       int    `json:"returns"`
	BytesReturned uint64 `json:"bytesReturned"`
	// ByPolicy totals them by the retention policy that had removed them.
	ByPolicy map[string]RegretTotal `json:"byPolicy,omitempty"`
	// Recent are the newest few returns.
	Recent []RegretReturn `json:"recent,omitempty"`
}

// RegretTotal is what came back of one policy's removals.
type RegretTotal struct {
	Returns int    `json:"returns"`
	Bytes   uint64 `json:"bytes"`
}

// RegretReturn is one image that came back.
type RegretReturn struct {
	Image      string `json:"image"`
	Repository string `json:"repository,omitempty"`
	Bytes      uint64 `json:"bytes"`
	Policy     string `json:"policy,omitempty"`
	// Run is the ImageJob that had removed it ("" for "eraser node prune").
	Run        string    `json:"run,omitempty"`
	RemovedAt  time.Time `json:"removedAt"`
	ReturnedAt time.Time `json:"returnedAt"`
}

// MaxRegretRecent is how many returns a summary names.
const MaxRegretRecent = 3

// PolicyTotal is what one retention policy removed.
type PolicyTotal struct {
	Images int    `json:"images"`
	Bytes  uint64 `json:"bytes"`
}

// ImageFs is the image filesystem's size and use, in bytes, as statfs
// reports the filesystem holding it (used = capacity - available, as the
// kubelet counts it).
type ImageFs struct {
	CapacityBytes   uint64 `json:"capacityBytes"`
	UsedBeforeBytes uint64 `json:"usedBeforeBytes"`
	UsedAfterBytes  uint64 `json:"usedAfterBytes"`
	// TargetBytes is what the disk-pressure policy brings the used bytes
	// under (the low threshold's share of the capacity); set when the run
	// found the filesystem at or above the high threshold.
	TargetBytes uint64 `json:"targetBytes,omitempty"`
	// TargetReached: a measurement after the removals showed the used
	// bytes under the target (never on a dry run).
	TargetReached bool `json:"targetReached,omitempty"`
	// TimeToTargetMs is the time, in milliseconds, from the first removal
	// for disk pressure to the measurement that showed the target reached;
	// FreedToTargetBytes is what the filesystem measured freed over it.
	// Both zero when the target was reached without such a removal.
	TimeToTargetMs     float64 `json:"timeToTargetMs,omitempty"`
	FreedToTargetBytes uint64  `json:"freedToTargetBytes,omitempty"`
}

// Freed compares what a run's removals should free, by the runtime's own
// records, with what they freed.
type Freed struct {
	// ExpectedBytes is what only the removed images held: each layer and
	// snapshot counted once however many images shared it, none that an
	// image left on the node still holds.
	ExpectedBytes uint64 `json:"expectedBytes"`
	// MeasuredBytes is what the image filesystem gained (MeasuredBy
	// "imagefs"), or the runtime's records shrank by ("runtime"); negative
	// when it grew. Absent on a dry run.
	MeasuredBytes int64  `json:"measuredBytes,omitempty"`
	MeasuredBy    string `json:"measuredBy,omitempty"`
	// Note says what likely made the two differ, when they differ by more
	// than the tolerance (5%, at least 4 MiB).
	Note string `json:"note,omitempty"`
	// Error says why either could not be measured.
	Error string `json:"error,omitempty"`
}

// FreedBytes is a node's one figure of the space its removals freed (would
// free, on a dry run): the measured gain where it was measured, else what
// only the removed images held by the runtime's records, else bytesFreed,
// their size as the runtime reported it (which counts a layer the images
// share once per image). The job's status and the per-node report both
// total it, so that they show the same figure.
func FreedBytes(bytesFreed uint64, f *Freed) int64 {
	switch {
	case f != nil && f.MeasuredBy != "":
		return f.MeasuredBytes
	case f != nil && (f.Error == "" || f.ExpectedBytes > 0):
		return int64(f.ExpectedBytes)
	default:
		return int64(bytesFreed)
	}
}

// Leftovers totals what removals left on the runtime: Reclaimed were
// deleted (would be, on a dry run), Found are left (their kind is not
// reclaimed, a re-check kept them, or Failed to delete).
type Leftovers struct {
	Found          int    `json:"found,omitempty"`
	FoundBytes     uint64 `json:"foundBytes,omitempty"`
	Reclaimed      int    `json:"reclaimed,omitempty"`
	ReclaimedBytes uint64 `json:"reclaimedBytes,omitempty"`
	Failed         int    `json:"failed,omitempty"`
	// SweptBytes is what the sweep of containerd's stores freed beyond
	// the leftovers listed (files no record names), measured on the image
	// filesystem; ReclaimedBytes includes it, Reclaimed does not count it.
	SweptBytes uint64 `json:"sweptBytes,omitempty"`
	// SweptUnknown: the stores were swept where the image filesystem is
	// not seen, so what that freed is not known (not none).
	SweptUnknown bool `json:"sweptUnknown,omitempty"`
	// Error says why they could not be looked for.
	Error string `json:"error,omitempty"`
}

// RegistryChecks are a run's answers from the images' registries: counts
// per answer ("present", "gone", "unknown"), how many came from the node's
// cache, the requests made, and the first few answers.
type RegistryChecks struct {
	Counts   map[string]int  `json:"counts,omitempty"`
	Cached   int             `json:"cached,omitempty"`
	Requests int             `json:"requests,omitempty"`
	First    []RegistryCheck `json:"first,omitempty"`
	// Error says what the checks went without: the operator's
	// credentials, or the cache of earlier answers.
	Error string `json:"error,omitempty"`
}

// MaxRegistryChecks is how many answers a summary names; the log has
// every one.
const MaxRegistryChecks = 3

// RegistryCheck is one image's answer.
type RegistryCheck struct {
	Image  string `json:"image"`
	Answer string `json:"answer"`
	Detail string `json:"detail,omitempty"`
}

// Add counts an answer and names it among the first few.
func (rc *RegistryChecks) Add(image, answer, detail string, cached bool) {
	if rc.Counts == nil {
		rc.Counts = map[string]int{}
	}
	rc.Counts[answer]++
	if cached {
		rc.Cached++
	}
	if len(rc.First) < MaxRegistryChecks {
		rc.First = append(rc.First, RegistryCheck{Image: textcut.Cut(image, maxMessage), Answer: answer, Detail: textcut.Cut(detail, maxMessage)})
	}
}

// Failure is one failed image, or an invalid ImageList entry.
type Failure struct {
	Image   string `json:"image"`
	Message string `json:"message"`
	// Invalid marks an entry that is not an image reference: nothing was
	// attempted for it.
	Invalid bool `json:"invalid,omitempty"`
}

// CountToRemove is the scanner's count of the images it handed to the
// remover (upstream's vulnerable_images_run_total).
const CountToRemove = "to remove"

// Verdict is the scanner's judgement on one image.
type Verdict struct {
	Image   string `json:"image"`
	Verdict string `json:"verdict"`
	// Remove: the image was handed to the remover.
	Remove bool `json:"remove,omitempty"`
	// Reason is the deciding findings (a few IDs) or the error.
	Reason string `json:"reason,omitempty"`
}

// AddFailure records a failure, keeping only the first few.
func (s *Summary) AddFailure(image, message string) {
	if len(s.Failures) >= maxFailures {
		return
	}
	s.Failures = append(s.Failures, Failure{Image: textcut.Cut(image, maxMessage), Message: textcut.Cut(message, maxMessage)})
}

// AddRefused records an image the runtime refused to remove for good,
// keeping only the first few.
func (s *Summary) AddRefused(image, message string) {
	if len(s.Refused) >= maxFailures {
		return
	}
	s.Refused = append(s.Refused, Failure{Image: textcut.Cut(image, maxMessage), Message: textcut.Cut(message, maxMessage)})
}

// AddInvalid records an invalid entry among the failures, keeping only the
// first few.
func (s *Summary) AddInvalid(entry, message string) {
	if len(s.Failures) >= maxFailures {
		return
	}
	s.Failures = append(s.Failures, Failure{Image: textcut.Cut(entry, maxMessage), Message: textcut.Cut(message, maxMessage), Invalid: true})
}

// Encode is the summary's termination-message form, always under MaxSize.
func (s Summary) Encode() []byte {
	s.Error = textcut.Cut(s.Error, maxMessage)
	if s.Freed != nil {
		f := *s.Freed
		f.Note, f.Error = textcut.Cut(f.Note, maxMessage), textcut.Cut(f.Error, maxMessage)
		s.Freed = &f
	}
	if s.Regret != nil {
		r := *s.Regret
		r.Recent = append([]RegretReturn(nil), r.Recent[:min(len(r.Recent), MaxRegretRecent)]...)
		for i := range r.Recent {
			r.Recent[i].Image, r.Recent[i].Repository, r.Recent[i].Run = textcut.Cut(r.Recent[i].Image, maxMessage), textcut.Cut(r.Recent[i].Repository, maxMessage), textcut.Cut(r.Recent[i].Run, maxMessage)
		}
		s.Regret = &r
	}
	if s.Leftovers != nil {
		l := *s.Leftovers
		l.Error = textcut.Cut(l.Error, maxMessage)
		s.Leftovers = &l
	}
	if s.RegistryChecks != nil {
		rc := *s.RegistryChecks
		rc.Error = textcut.Cut(rc.Error, maxMessage)
		s.RegistryChecks = &rc
	}
	for {
		data, err := json.Marshal(s)
		if err == nil && len(data) <= MaxSize {
			return data
		}
		// Verdicts go first (the log has them all), then refusals, then
		// failures.
		if n := len(s.Verdicts); n > 0 {
			drop := max(1, n/4)
			s.Verdicts = s.Verdicts[:n-drop]
			s.VerdictsOmitted += drop
			continue
		}
		// Then the returns named: the totals keep them, the log has them.
		if s.Regret != nil && len(s.Regret.Recent) > 0 {
			r := *s.Regret
			r.Recent = r.Recent[:len(r.Recent)-1]
			s.Regret = &r
			continue
		}
		// Then the registry's answers: the counts keep them.
		if rc := s.RegistryChecks; rc != nil && len(rc.First) > 0 {
			c := *rc
			c.First = c.First[:len(c.First)-1]
			s.RegistryChecks = &c
			continue
		}
		// Then refusals: they fail nothing, and the counts keep them.
		if n := len(s.Refused); n > 0 {
			s.Refused = s.Refused[:n-1]
			continue
		}
		if len(s.Failures) == 0 {
			return []byte(`{"error":"summary too large"}`)
		}
		s.Failures = s.Failures[:len(s.Failures)-1]
	}
}

// Decode reads a termination message.
func Decode(data []byte) (Summary, error) {
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("worker summary is not JSON: %w", err)
	}
	return s, nil
}

// Write writes the summary to the termination message file. Outside a pod
// that file may not exist; the caller logs the error and carries on.
func Write(path string, s Summary) error {
	if path == "" {
		return nil
	}
	return os.WriteFile(path, s.Encode(), 0o644)
}

// Relief says, for people, how a run under disk pressure ended: the
// target, and whether a measurement showed the filesystem below it, how
// long after the first removal for it and what it took; "" when the run
// was not under pressure.
func (f ImageFs) Relief() string {
	if f.TargetBytes == 0 || f.CapacityBytes == 0 {
		return ""
	}
	target := fmt.Sprintf("the target %s (%.1f%% of %s)", bytesize.Format(f.TargetBytes), float64(f.TargetBytes)*100/float64(f.CapacityBytes), bytesize.Format(f.CapacityBytes))
	if !f.TargetReached {
		return fmt.Sprintf("disk pressure: still at or above %s, %.1f%% used", target, float64(f.UsedAfterBytes)*100/float64(f.CapacityBytes))
	}
	if f.FreedToTargetBytes == 0 && f.TimeToTargetMs == 0 {
		return "disk pressure: below " + target + " with no removal for it"
	}
	return fmt.Sprintf("disk pressure: below %s %s after the first removal for it, %s freed", target,
		(time.Duration(f.TimeToTargetMs * float64(time.Millisecond))).Round(time.Millisecond), bytesize.Format(f.FreedToTargetBytes))
}
