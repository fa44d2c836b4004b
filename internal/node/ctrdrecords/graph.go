package ctrdrecords

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// containerd's garbage-collection labels.
const (
	gcLabelPrefix    = "containerd.io/gc."
	LabelRoot        = "containerd.io/gc.root"
	labelRefContent  = "containerd.io/gc.ref.content."
	labelRefSnapshot = "containerd.io/gc.ref.snapshot."
)

// RefKind is a kind of record.
type RefKind int

const (
	ImageRef RefKind = iota
	LeaseRef
	ContainerRef
	// ContentRef is a namespace's record of a blob; blobRef the blob on
	// disk, which containerd removes once no namespace records it.
	ContentRef
	blobRef
	SnapshotRef
)

// Ref names a record: an image by name, a lease or container by ID, content
// by digest, a snapshot as "snapshotter/key".
type Ref struct {
	Kind      RefKind
	Namespace string
	ID        string
}

// Graph is what holds what on one containerd, as its garbage collector
// follows it: images hold their target content, content holds what its
// gc.ref labels name, snapshots their parents, containers their snapshot,
// leases their resources; images, containers, leases and anything labelled
// gc.root are held by nothing and hold the rest.
type Graph struct {
	edges map[Ref][]Ref
	sizes map[Ref]int64
	roots []Ref
	held  map[Ref]bool
}

// NewGraph builds the graph of r's records.
func NewGraph(r Records) *Graph {
	g := &Graph{edges: map[Ref][]Ref{}, sizes: map[Ref]int64{}}
	for _, ns := range r.Namespaces {
		g.addNamespace(ns)
	}
	g.held = g.mark(g.roots)
	return g
}

func (g *Graph) addNamespace(ns Namespace) {
	for _, img := range ns.Images {
		from := Ref{ImageRef, ns.Name, img.Name}
		g.roots = append(g.roots, from)
		g.edges[from] = append(g.edges[from], Ref{ContentRef, ns.Name, img.Target})
	}
	for _, c := range ns.Containers {
		from := Ref{ContainerRef, ns.Name, c.ID}
		g.roots = append(g.roots, from)
		if c.SnapshotKey != "" {
			g.edges[from] = append(g.edges[from], Ref{SnapshotRef, ns.Name, c.Snapshotter + "/" + c.SnapshotKey})
		}
		g.edges[from] = append(g.edges[from], labelRefs(ns.Name, c.Labels)...)
	}
	for _, l := range ns.Leases {
		from := Ref{LeaseRef, ns.Name, l.ID}
		g.roots = append(g.roots, from)
		for _, res := range l.Resources {
			switch {
			case res.Type == "content":
				g.edges[from] = append(g.edges[from], Ref{ContentRef, ns.Name, res.ID})
			case strings.HasPrefix(res.Type, "snapshots/"):
				g.edges[from] = append(g.edges[from], Ref{SnapshotRef, ns.Name, strings.TrimPrefix(res.Type, "snapshots/") + "/" + res.ID})
			}
		}
	}
	for _, b := range ns.Content {
		at := Ref{ContentRef, ns.Name, b.Digest}
		blob := Ref{Kind: blobRef, ID: b.Digest}
		g.sizes[blob] = b.Bytes
		if _, ok := b.Labels[LabelRoot]; ok {
			g.roots = append(g.roots, at)
		}
		g.edges[at] = append(g.edges[at], blob)
		g.edges[at] = append(g.edges[at], labelRefs(ns.Name, b.Labels)...)
	}
	for _, s := range ns.Snapshots {
		at := Ref{SnapshotRef, ns.Name, s.Snapshotter + "/" + s.Key}
		g.sizes[at] = s.Bytes
		if _, ok := s.Labels[LabelRoot]; ok {
			g.roots = append(g.roots, at)
		}
		if s.Parent != "" {
			g.edges[at] = append(g.edges[at], Ref{SnapshotRef, ns.Name, s.Snapshotter + "/" + s.Parent})
		}
		g.edges[at] = append(g.edges[at], labelRefs(ns.Name, s.Labels)...)
	}
}

// labelRefs are what gc.ref labels point at: content by digest; a snapshot
// by key, the snapshotter named after the prefix (and before any "/").
func labelRefs(ns string, labels map[string]string) []Ref {
	var out []Ref
	for k, v := range labels {
		switch {
		case strings.HasPrefix(k, labelRefContent):
			out = append(out, Ref{ContentRef, ns, v})
		case strings.HasPrefix(k, labelRefSnapshot):
			sn, _, _ := strings.Cut(strings.TrimPrefix(k, labelRefSnapshot), "/")
			out = append(out, Ref{SnapshotRef, ns, sn + "/" + v})
		}
	}
	return out
}

// mark is every record the roots hold, themselves included.
func (g *Graph) mark(roots []Ref) map[Ref]bool {
	seen := map[Ref]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		stack = append(stack, g.edges[r]...)
	}
	return seen
}

// size is the disk the marked records take.
func (g *Graph) size(marked map[Ref]bool) uint64 {
	var n uint64
	for r := range marked {
		if s := g.sizes[r]; s > 0 {
			n += uint64(s)
		}
	}
	return n
}

// Exclusive is the disk only the given records hold: what containerd's
// garbage collector frees once they are deleted. A blob several images
// share, in any namespace, counts only when all of them are given.
func (g *Graph) Exclusive(refs []Ref) uint64 {
	drop := make(map[Ref]bool, len(refs))
	for _, r := range refs {
		drop[r] = true
	}
	rest := slices.DeleteFunc(slices.Clone(g.roots), func(r Ref) bool { return drop[r] })
	return g.size(g.held) - g.size(g.mark(rest))
}

// Total is the disk every record takes, held or not.
func (g *Graph) Total() uint64 {
	var n uint64
	for _, s := range g.sizes {
		n += uint64(max(s, 0))
	}
	return n
}

// Unheld is content or a snapshot that nothing holds: the garbage
// collector removes it at its next collection.
type Unheld struct {
	Ref
	Bytes uint64
}

// Unheld lists what nothing holds, content by its blob (no namespace).
func (g *Graph) Unheld() []Unheld {
	var out []Unheld
	for _, r := range slices.SortedFunc(maps.Keys(g.sizes), compareRefs) {
		if g.held[r] {
			continue
		}
		u := Unheld{Ref: r, Bytes: uint64(max(g.sizes[r], 0))}
		if r.Kind == blobRef {
			u.Kind = ContentRef
		}
		out = append(out, u)
	}
	return out
}

func compareRefs(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
}
