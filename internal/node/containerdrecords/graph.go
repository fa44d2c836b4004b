package containerdrecords

import (
	"cmp"
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
//
// It is compact, as the remover keeps it through its removals within its
// memory limit: the records' refs once, sorted (a record's number is its
// place), edges as numbers, no labels.
type Graph struct {
	refs  []Ref
	sizes []int64 // -1: no disk of its own (an image, a lease, ...)
	// Record i holds to[from[i]:from[i+1]].
	from, to []int32
	roots    []int32
	held     []bool
}

// builder collects the graph by ref before it is numbered.
type builder struct {
	edges map[Ref][]Ref
	sizes map[Ref]int64
	roots []Ref
}

// NewGraph builds the graph of r's records.
func NewGraph(r Records) *Graph {
	b := &builder{edges: map[Ref][]Ref{}, sizes: map[Ref]int64{}}
	for _, ns := range r.Namespaces {
		b.addNamespace(ns)
	}
	return b.number()
}

// number gives each ref its place in sorted order and the edges by place.
func (b *builder) number() *Graph {
	seen := map[Ref]bool{}
	var refs []Ref
	add := func(r Ref) {
		if !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	for r, to := range b.edges {
		add(r)
		for _, t := range to {
			add(t)
		}
	}
	for r := range b.sizes {
		add(r)
	}
	for _, r := range b.roots {
		add(r)
	}
	slices.SortFunc(refs, compareRefs)
	index := make(map[Ref]int32, len(refs))
	for i, r := range refs {
		index[r] = int32(i)
	}
	g := &Graph{refs: refs, sizes: make([]int64, len(refs)), from: make([]int32, len(refs)+1)}
	for i, r := range refs {
		g.sizes[i] = -1
		if s, ok := b.sizes[r]; ok {
			g.sizes[i] = max(s, 0)
		}
		g.from[i] = int32(len(g.to))
		for _, t := range b.edges[r] {
			g.to = append(g.to, index[t])
		}
	}
	g.from[len(refs)] = int32(len(g.to))
	for _, r := range b.roots {
		g.roots = append(g.roots, index[r])
	}
	g.held = g.mark(g.roots)
	return g
}

func (b *builder) addNamespace(ns Namespace) {
	for _, img := range ns.Images {
		from := Ref{ImageRef, ns.Name, img.Name}
		b.roots = append(b.roots, from)
		b.edges[from] = append(b.edges[from], Ref{ContentRef, ns.Name, img.Target})
	}
	for _, c := range ns.Containers {
		from := Ref{ContainerRef, ns.Name, c.ID}
		b.roots = append(b.roots, from)
		if c.SnapshotKey != "" {
			b.edges[from] = append(b.edges[from], Ref{SnapshotRef, ns.Name, c.Snapshotter + "/" + c.SnapshotKey})
		}
		b.edges[from] = append(b.edges[from], labelRefs(ns.Name, c.Labels)...)
	}
	for _, l := range ns.Leases {
		from := Ref{LeaseRef, ns.Name, l.ID}
		b.roots = append(b.roots, from)
		for _, res := range l.Resources {
			switch {
			case res.Type == "content":
				b.edges[from] = append(b.edges[from], Ref{ContentRef, ns.Name, res.ID})
			case strings.HasPrefix(res.Type, "snapshots/"):
				b.edges[from] = append(b.edges[from], Ref{SnapshotRef, ns.Name, strings.TrimPrefix(res.Type, "snapshots/") + "/" + res.ID})
			}
		}
	}
	for _, blob := range ns.Content {
		at := Ref{ContentRef, ns.Name, blob.Digest}
		onDisk := Ref{Kind: blobRef, ID: blob.Digest}
		b.sizes[onDisk] = blob.Bytes
		if _, ok := blob.Labels[LabelRoot]; ok {
			b.roots = append(b.roots, at)
		}
		b.edges[at] = append(b.edges[at], onDisk)
		b.edges[at] = append(b.edges[at], labelRefs(ns.Name, blob.Labels)...)
	}
	for _, s := range ns.Snapshots {
		at := Ref{SnapshotRef, ns.Name, s.Snapshotter + "/" + s.Key}
		b.sizes[at] = s.Bytes
		if _, ok := s.Labels[LabelRoot]; ok {
			b.roots = append(b.roots, at)
		}
		if s.Parent != "" {
			b.edges[at] = append(b.edges[at], Ref{SnapshotRef, ns.Name, s.Snapshotter + "/" + s.Parent})
		}
		b.edges[at] = append(b.edges[at], labelRefs(ns.Name, s.Labels)...)
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
func (g *Graph) mark(roots []int32) []bool {
	seen := make([]bool, len(g.refs))
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[r] {
			continue
		}
		seen[r] = true
		stack = append(stack, g.to[g.from[r]:g.from[r+1]]...)
	}
	return seen
}

// size is the disk the marked records take.
func (g *Graph) size(marked []bool) uint64 {
	var n uint64
	for i, m := range marked {
		if m && g.sizes[i] > 0 {
			n += uint64(g.sizes[i])
		}
	}
	return n
}

// Exclusive is the disk only the given records hold: what containerd's
// garbage collector frees once they are deleted. A blob several images
// share, in any namespace, counts only when all of them are given.
// Records the graph does not hold are ignored.
func (g *Graph) Exclusive(refs []Ref) uint64 {
	drop := make([]bool, len(g.refs))
	for _, r := range refs {
		if i, ok := slices.BinarySearchFunc(g.refs, r, compareRefs); ok {
			drop[i] = true
		}
	}
	rest := slices.DeleteFunc(slices.Clone(g.roots), func(i int32) bool { return drop[i] })
	return g.size(g.held) - g.size(g.mark(rest))
}

// Total is the disk every record takes, held or not.
func (g *Graph) Total() uint64 {
	var n uint64
	for _, s := range g.sizes {
		if s > 0 {
			n += uint64(s)
		}
	}
	return n
}

// Unheld is content or a snapshot that nothing holds: the garbage
// collector removes it at its next collection.
type Unheld struct {
	Ref
	Bytes uint64
}

// Unheld lists what nothing holds, content by its blob (no namespace), in
// the refs' order.
func (g *Graph) Unheld() []Unheld {
	var out []Unheld
	for i, r := range g.refs {
		if g.held[i] || g.sizes[i] < 0 {
			continue
		}
		u := Unheld{Ref: r, Bytes: uint64(g.sizes[i])}
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
