package workerresult

// Outcome is what happened to one image or ImageList entry on a node: it
// was removed, or why it was not. The strings are the keys of a summary's
// Counts and the words the per-node report, the logs and `eraser node`
// print; the manager sums them into the ImageJob's status, so they are a
// contract between the node and the manager, defined here alone.
type Outcome string

// Removed is the one outcome that removes.
const Removed Outcome = "removed"

// The reasons an image is kept, in the order the node's keep rules
// (internal/node/protect) apply them, then the retention policy's.
const (
	// InUse: a container uses the image or mounts it as an image volume.
	InUse Outcome = "in use"
	// Pinned: the runtime pins it, or it is the runtime's sandbox image.
	Pinned Outcome = "pinned"
	// Excluded: an exclusion list protects it.
	Excluded Outcome = "excluded"
	// NotRepullable: no registry can give it back (imported, built,
	// side-loaded).
	NotRepullable Outcome = "not re-pullable"
	// Referenced: a pod or a workload template of the cluster names it.
	Referenced Outcome = "referenced"
	// TooYoung: it arrived on the node under the minimum age.
	TooYoung Outcome = "too young"
	// CoolingDown: it came back after an earlier removal and is within its
	// hold, which grows with each return; every policy but an ImageList's
	// names keeps it.
	CoolingDown Outcome = "cooling down"
	// RecentlyUsed: a policy that considered it found it used too recently.
	RecentlyUsed Outcome = "recently used"
	// NotNeeded: the disk-pressure policy had freed enough without it, or
	// it is among the newest versions keepVersions keeps.
	NotNeeded Outcome = "not needed"
	// GoneFromRegistry: an automatic policy chose it, a workload
	// references it or a container used it lately, and its registry no
	// longer serves its content: removed, it could not be pulled back.
	GoneFromRegistry Outcome = "gone from registry"
	// RegistryUnreachable: as GoneFromRegistry, but its registry could not
	// be asked (timeout, refused credentials, the run's bound of
	// requests): kept unless the configuration says to remove it anyway.
	RegistryUnreachable Outcome = "registry unreachable"
)

// The outcomes of entries and removals that are neither removed nor kept
// by a rule.
const (
	NotOnNode Outcome = "not on node"
	// Refused: the runtime will not remove the image (it refused for good,
	// or answered that it removed it and still lists it). Counted and
	// named, but not a failure of the node.
	Refused Outcome = "refused"
	Failed  Outcome = "failed"
	// Invalid: the entry is not an image reference; nothing is removed
	// for it.
	Invalid Outcome = "invalid"
)

// Outcomes lists every outcome in the order summaries and tables print
// them.
var Outcomes = []Outcome{Removed, InUse, Pinned, Excluded, Referenced, NotRepullable, TooYoung, CoolingDown, RecentlyUsed, NotNeeded, GoneFromRegistry, RegistryUnreachable, NotOnNode, Refused, Failed, Invalid}

// Count is the summary's count of one outcome.
func (s Summary) Count(o Outcome) int { return s.Counts[string(o)] }
