package protect

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/cri"
	"github.com/eraser-oss/eraser/internal/node/retention"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

// Scope says which removals a rule stops.
type Scope int

const (
	// Always: every removal, an ImageList that names the image too.
	Always Scope = iota + 1
	// Automatic: the automatic policies ("*", scheduled runs, the
	// scanner's verdicts, disk pressure); an ImageList that names the
	// image still removes it: the user asked for that image.
	Automatic
)

func (s Scope) String() string {
	switch s {
	case Always:
		return "always"
	case Automatic:
		return "automatic policies"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Subject is what the rules know of one image. A fact the run did not
// gather is left zero, and the rule that needs it keeps nothing on its
// account, except where not knowing must keep (the cluster's references
// read incomplete).
type Subject struct {
	Image cri.Image
	// Keys are Keys(Image), computed once by the caller.
	Keys []string
	// Used indexes the node's containers (NewContainers).
	Used Containers
	// Policy is the node's sandbox images and exclusions.
	Policy Policy
	// Cluster is what the run was told of the cluster's references and
	// its switches; Referrer is the reference that names the image, nil:
	// none.
	Cluster  Cluster
	Referrer *Referrer
	// Vulnerable: the scanner's verdict chose the image.
	Vulnerable bool
	// Arrived is when the image was pulled or re-tagged on the node; Now
	// and MinAge judge it. AgeNote says where the age came from, when that
	// is worth saying.
	Arrived, Now time.Time
	MinAge       time.Duration
	AgeNote      string
}

// Cluster is what the automatic policies' rules are told of the cluster
// and its switches, once per run. An ImageList that names an image
// removes it all the same.
type Cluster struct {
	// Read: the run was given the cluster's references. Without them the
	// rules below keep nothing: the protection is switched off.
	Read bool
	// NodeIncomplete: the node's pods referenced more images than their
	// set could carry; ClusterIncomplete: the cluster's set was written
	// without some of its references. Either way any image may be
	// referenced.
	NodeIncomplete, ClusterIncomplete bool
	// RemoveVulnerable lets the scanner's verdict remove an image that
	// only a workload template references: the pod pulls its tag again,
	// fixed once the tag is. Images of the node's own pods stay: they are
	// about to run, and removing them only makes the kubelet pull the same
	// image.
	RemoveVulnerable bool
	// KeepNotRepullable keeps images no registry can give back.
	KeepNotRepullable bool
}

// Referrer is a reference that names an image.
type Referrer struct {
	// Owner is the pod or workload, "Kind namespace/name".
	Owner string
	// OnNode: a pod bound to this node, not a template.
	OnNode bool
}

// Describe is the detail of a Referenced verdict.
func (r Referrer) Describe() string {
	if r.OnNode {
		return strings.Replace(r.Owner, "Pod ", "pod ", 1) + " on this node"
	}
	if strings.HasPrefix(r.Owner, "Pod ") {
		return "referenced by " + r.Owner + ", not yet scheduled"
	}
	return "referenced by " + r.Owner
}

// Rule is one rule of the chain.
type Rule struct {
	// Name says what keeps the image, as docs/protection.md lists it.
	Name   string
	Reason workerresult.Outcome
	Scope  Scope
	// keep decides for one image and says why it keeps it.
	keep func(*Subject) (detail string, kept bool)
}

// chain is every keep rule, in the order they apply: the first that keeps
// an image decides its reason. The rules of every removal come first, so
// that a run may apply them once when it reads the node and the automatic
// ones per candidate later, in the same order.
var chain = []Rule{
	{Name: "a container uses it", Reason: workerresult.InUse, Scope: Always, keep: usedByContainer},
	{Name: "a container mounts it as an image volume", Reason: workerresult.InUse, Scope: Always, keep: mountedByContainer},
	{Name: "the runtime pins it", Reason: workerresult.Pinned, Scope: Always, keep: pinnedByRuntime},
	{Name: "it is the runtime's sandbox image", Reason: workerresult.Pinned, Scope: Always, keep: sandboxImage},
	{Name: "it looks like a pause image, and the runtime named none", Reason: workerresult.Pinned, Scope: Always, keep: guessedPause},
	{Name: "an exclusion list protects it", Reason: workerresult.Excluded, Scope: Always, keep: excludedByList},
	{Name: "no registry can give it back", Reason: workerresult.NotRepullable, Scope: Automatic, keep: cannotBePulledBack},
	{Name: "a pod or a workload references it", Reason: workerresult.Referenced, Scope: Automatic, keep: referencedByWorkload},
	{Name: "the cluster's references are incomplete", Reason: workerresult.Referenced, Scope: Automatic, keep: referencesIncomplete},
	{Name: "it arrived under the minimum age", Reason: workerresult.TooYoung, Scope: Automatic, keep: tooYoung},
}

// Chain is the keep rules in the order they apply.
func Chain() []Rule { return slices.Clone(chain) }

// Judge applies the rules of one scope to an image, in the chain's order.
func Judge(s *Subject, scope Scope) Decision {
	return first(s, func(r Rule) bool { return r.Scope == scope })
}

// UsedNow applies the rules that keep an image a container uses, alone:
// the re-check right before a removal, on a fresh container listing.
func UsedNow(img cri.Image, used Containers) Decision {
	return first(&Subject{Image: img, Keys: Keys(img), Used: used}, func(r Rule) bool { return r.Reason == workerresult.InUse })
}

// first is the verdict of the first rule, among those chosen, that keeps
// the image.
func first(s *Subject, chosen func(Rule) bool) Decision {
	for _, r := range chain {
		if !chosen(r) {
			continue
		}
		if detail, ok := r.keep(s); ok {
			return Decision{Reason: r.Reason, Detail: detail}
		}
	}
	return Decision{}
}

// usedByContainer: a container of any state names the image. An exited
// container can be restarted, and a created one is about to start.
func usedByContainer(s *Subject) (string, bool) {
	for _, k := range s.Keys {
		if c, ok := s.Used.images[k]; ok {
			return "container " + c, true
		}
	}
	return "", false
}

// mountedByContainer: a container of any state mounts the image as an
// image volume (a pod's volumes[].image): its restart needs the image as
// much as its own, and the runtime may drop content under the mount.
func mountedByContainer(s *Subject) (string, bool) {
	for _, k := range s.Keys {
		if c, ok := s.Used.mounts[k]; ok {
			return "container " + c + " mounts it as an image volume", true
		}
	}
	return "", false
}

// pinnedByRuntime: the runtime marks the image pinned (its sandbox image,
// or one its configuration pins); containerd would remove it all the same.
func pinnedByRuntime(s *Subject) (string, bool) {
	return "pinned by the runtime", s.Image.Pinned
}

// sandboxImage: removing the pause image breaks every new pod on the node.
// The runtime's status names it; pod sandboxes name the ones in use.
func sandboxImage(s *Subject) (string, bool) {
	for _, k := range refKeys(s.Policy.SandboxImage) {
		if slices.Contains(s.Keys, k) {
			return "the runtime's sandbox image", true
		}
	}
	for _, img := range s.Policy.SandboxImages {
		for _, k := range refKeys(img) {
			if slices.Contains(s.Keys, k) {
				return "a pod sandbox's image", true
			}
		}
	}
	return "", false
}

// guessedPause: where neither the runtime's status nor a pod sandbox names
// the pause image (the run says so in GuessPause), keeping every image that
// looks like one is the only way not to remove it.
func guessedPause(s *Subject) (string, bool) {
	return guessDetail, s.Policy.GuessPause && LooksLikePause(s.Image)
}

// excludedByList: the operator's exclusion lists name the image.
func excludedByList(s *Subject) (string, bool) {
	if pat, ok := s.Policy.excludes(s.Image); ok {
		return "exclusion " + pat.String(), true
	}
	return "", false
}

// cannotBePulledBack: once removed, nothing brings the image back, and
// the scanner's verdict cannot replace it with a fixed one either.
func cannotBePulledBack(s *Subject) (string, bool) {
	if !s.Cluster.KeepNotRepullable || !CannotPullBack(s.Image) {
		return "", false
	}
	const rest = ": imported or built on the node, not pulled; only an ImageList that names it removes it"
	if len(s.Image.Digests) > 0 {
		// CRI-O makes up a repository digest for every name: one under
		// localhost/ alone is all it shows of an image never pulled.
		return "repository digest on localhost/ only" + rest, true
	}
	return "no repository digest" + rest, true
}

// referencedByWorkload: a pod or a workload template will ask for the
// image again. The scanner's verdict may take an image only a template
// references (its tag is pulled again, fixed once the tag is), never one
// of the node's own pods, which are about to run it.
func referencedByWorkload(s *Subject) (string, bool) {
	ref := s.Referrer
	if !s.Cluster.Read || ref == nil {
		return "", false
	}
	if s.Vulnerable && s.Cluster.RemoveVulnerable && !ref.OnNode && !s.Cluster.NodeIncomplete {
		return "", false
	}
	return ref.Describe(), true
}

// referencesIncomplete: the references could not all be written, so any
// image may be one a workload needs. An image a template is known to
// reference was judged by the rule before: a missing part of the
// cluster's set changes nothing for it, while the node's set missing a
// part may hide one of the node's own pods.
func referencesIncomplete(s *Subject) (string, bool) {
	switch {
	case !s.Cluster.Read:
		return "", false
	case s.Cluster.NodeIncomplete:
		return "the node's pods reference more images than their set can carry: every image is kept from the automatic policies", true
	case s.Cluster.ClusterIncomplete && s.Referrer == nil:
		return "the cluster's references could not be written whole for this run: every image is kept from the automatic policies", true
	}
	return "", false
}

// tooYoung: a pod's images are pulled one by one before its containers
// are created, so an image that just arrived may be about to be used.
func tooYoung(s *Subject) (string, bool) {
	if s.MinAge <= 0 || s.Now.IsZero() || s.Now.Sub(s.Arrived) >= s.MinAge {
		return "", false
	}
	return fmt.Sprintf("arrived %s ago, under the minimum age %s%s", retention.Ago(s.Now, s.Arrived), s.MinAge, s.AgeNote), true
}
