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
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

// Leftover is one thing a removal left behind.
type Leftover struct {
	Kind leftoverkind.Kind `json:"kind"`
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
