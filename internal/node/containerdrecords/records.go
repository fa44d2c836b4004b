// Package containerdrecords reads what containerd keeps on a node, in every
// namespace, through the gRPC clients containerd's API module generates:
// its image records, the content and snapshots they hold, the leases and
// containers that hold more. containerd serves this API on the node's CRI
// endpoint, a unix socket on Linux and a named pipe on Windows, dialled as
// the CRI client dials it. What a removal left behind is found in these
// records (internal/node/leftover); the CRI shows only the k8s.io
// namespace's images, and none of the rest.
package containerdrecords

import "time"

// Records are one containerd's records, by namespace. Of the records'
// labels only the garbage collector's are kept, but for leases': a lease
// has few, and they tell whose it is.
type Records struct {
	Namespaces []Namespace
}

// Namespace is what containerd keeps in one namespace.
type Namespace struct {
	Name       string
	Images     []Image
	Content    []Blob
	Snapshots  []Snapshot
	Leases     []Lease
	Containers []Container
}

// Image is an image record: a name and the descriptor it points at.
type Image struct {
	Name   string
	Target string // digest of the manifest or index
	Labels map[string]string
}

// Blob is a piece of content.
type Blob struct {
	Digest string
	Bytes  int64
	Labels map[string]string
}

// Snapshot is one snapshot of a snapshotter, with its own disk usage (its
// parent's not included).
type Snapshot struct {
	Snapshotter, Key, Parent string
	Active                   bool
	Bytes                    int64
	Labels                   map[string]string
}

// Lease holds content and snapshots while a client works with them (a
// pull, an import) and for as long after as the client forgets to delete
// it.
type Lease struct {
	ID        string            `json:"id"`
	CreatedAt time.Time         `json:"createdAt"`
	Labels    map[string]string `json:"labels,omitempty"`
	Resources []Resource        `json:"resources,omitempty"`
}

// Resource is what a lease holds: Type is "content", "ingests" or
// "snapshots/<snapshotter>".
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Container holds its snapshot.
type Container struct {
	ID, Image, Snapshotter, SnapshotKey string
	Labels                              map[string]string
}
