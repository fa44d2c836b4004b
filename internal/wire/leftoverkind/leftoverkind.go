// Package leftoverkind names the kinds of what image removals leave
// behind on a node's runtime: the workers find and reclaim them, the
// configuration (leftovers.reclaim) chooses which, and the reports count
// them by these names.
package leftoverkind

// Kind is a kind of leftover.
type Kind string

// containerd's leftovers.
const (
	// UnnamedImage: an image record of the kubelet's namespace named only
	// by its ID (the config digest), with no name a pod could use: what a
	// CRI removal cut short leaves (containerd#13875).
	UnnamedImage Kind = "unnamed-image"
	// OtherNamespace: an image in a namespace other than the kubelet's,
	// which the CRI, the kubelet and Eraser's runs never see.
	OtherNamespace Kind = "other-namespace"
	// OldLease: a lease its client is done with (its expiry passed), or
	// one of containerd's own pull and import clients older than the
	// lease age: what a pull or an import that ended long ago left.
	OldLease Kind = "old-lease"
	// HeldLease: a lease of the kubelet's namespace older than the lease
	// age that its client holds on purpose (no expiry, BuildKit's gc.flat,
	// a shape containerd's pull and import clients do not give): listed,
	// with why, and never reclaimed.
	HeldLease Kind = "held-lease"
	// GCRoot: content or a snapshot labelled containerd.io/gc.root, which
	// the garbage collector keeps whatever references it.
	GCRoot Kind = "gc-root"
	// Unreferenced: content or snapshots nothing holds; containerd's
	// garbage collector removes them at its next collection.
	Unreferenced Kind = "unreferenced"
)

// The leftovers of CRI-O, found in containers/storage's records.
const (
	// UnreferencedLayer: a layer no image and no container holds, directly
	// or as a parent: what an image removal cut short leaves. Nothing
	// deletes it but a removal by hand.
	UnreferencedLayer Kind = "unreferenced-layer"
	// IncompleteLayer: a layer flagged incomplete, what an interrupted
	// pull or removal leaves; containers/storage deletes these the next
	// time a user of the store (CRI-O's restart) opens it for writing.
	IncompleteLayer Kind = "incomplete-layer"
	// OrphanContainer: the storage of a container or pod sandbox that
	// CRI-O made and no longer lists, its root filesystem left behind
	// (cri-o/cri-o#6981). It holds its image, which cannot be removed
	// while it is there.
	OrphanContainer Kind = "orphan-container"
)

// Containerd are the kinds a configuration may reclaim on containerd's
// nodes. A gc.root is left alone: someone marked it to be kept; a held
// lease is its client's.
var Containerd = []Kind{UnnamedImage, OtherNamespace, OldLease, Unreferenced}

// CRIO are the kinds a configuration may reclaim on CRI-O's nodes.
var CRIO = []Kind{UnreferencedLayer, IncompleteLayer, OrphanContainer}

// Reclaimable are the kinds a configuration may reclaim, containerd's then
// CRI-O's.
var Reclaimable = append(append([]Kind(nil), Containerd...), CRIO...)
