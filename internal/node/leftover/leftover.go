// Package leftover finds what image removals left behind on a node's
// runtime, and how many bytes each leftover holds that nothing else does:
// what removing it would free. It decides from the runtime's records alone
// (containerdrecords for containerd, criorecords for CRI-O's containers/storage)
// and needs neither the runtime nor the cluster; on CRI-O, only which
// containers are live comes from its CRI.
package leftover

import (
	"time"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
)

// Kind is a kind of leftover.
type Kind string

// containerd's leftovers; CRI-O's are in crio.go.
const (
	// UnnamedImage: an image record of the kubelet's namespace named only
	// by its ID (the config digest), with no name a pod could use: what a
	// CRI removal cut short leaves (containerd#13875).
	UnnamedImage Kind = "unnamed-image"
	// OtherNamespace: an image in a namespace other than the kubelet's,
	// which the CRI, the kubelet and Eraser's runs never see.
	OtherNamespace Kind = "other-namespace"
	// OldLease: a lease its client is done with (its expiry passed), or
	// one of containerd's own pull and import clients older than
	// Options.LeaseAge: what a pull or an import that ended long ago left
	// (containerd_lease.go).
	OldLease Kind = "old-lease"
	// HeldLease: a lease of the kubelet's namespace older than
	// Options.LeaseAge that its client holds on purpose (no expiry, BuildKit's
	// gc.flat, a shape containerd's pull and import clients do not give):
	// listed, with why, and never reclaimed.
	HeldLease Kind = "held-lease"
	// GCRoot: content or a snapshot labelled containerd.io/gc.root, which
	// the garbage collector keeps whatever references it.
	GCRoot Kind = "gc-root"
	// Unreferenced: content or snapshots nothing holds; containerd's
	// garbage collector removes them at its next collection.
	Unreferenced Kind = "unreferenced"
)

// Leftover is one thing a removal left behind.
type Leftover struct {
	Kind Kind `json:"kind"`
	// Namespace is containerd's namespace of the record; empty for
	// content, which every namespace shares, and on CRI-O, which has none.
	Namespace string `json:"namespace"`
	// Name is the image record's name (the first, when several name the
	// same image), the lease's ID, the content's digest or the snapshot's
	// "snapshotter/key"; on CRI-O, the layer's ID, or the container's ID
	// and its first name in parentheses.
	Name string `json:"name"`
	// Bytes is what only this leftover holds: removing it frees that much.
	// A CRI-O layer's are its own: a parent nothing else holds is a
	// leftover of its own.
	Bytes uint64 `json:"bytes"`
	Why   string `json:"why"`
	// Records are every name of an image leftover (its tags, digests and
	// ID), as one reclaim deletes them all.
	Records []string `json:"records,omitempty"`
	// Targets are what each of Records pointed at when read, by name: a
	// name pointing elsewhere at its deletion (a pull, a retag) keeps the
	// image.
	Targets map[string]string `json:"targets,omitempty"`
	// Lease is a lease leftover's record as read: its deletion goes ahead
	// only while the lease is still this one.
	Lease *containerdrecords.Lease `json:"lease,omitempty"`
}

// Options set what counts as a leftover on containerd.
type Options struct {
	// CRINamespace is the kubelet's namespace, k8s.io.
	CRINamespace string
	// LeaseAge is the age past which a lease of containerd's own pull and
	// import clients is a leftover: theirs live minutes.
	LeaseAge time.Duration
	Now      time.Time
}
