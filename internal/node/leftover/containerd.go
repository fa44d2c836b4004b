package leftover

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eraser-oss/eraser/internal/node/ctrdrecords"
)

// containerd's garbage-collection labels.
const (
	labelRoot        = "containerd.io/gc.root"
	labelRefContent  = "containerd.io/gc.ref.content."
	labelRefSnapshot = "containerd.io/gc.ref.snapshot."
)

var idName = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// Containerd finds the leftovers in containerd's records, largest first.
func Containerd(r ctrdrecords.Records, o Options) []Leftover {
	g := newGraph(r)
	var found []candidate
	for _, ns := range r.Namespaces {
		found = append(found, images(ns, o)...)
		for _, l := range ns.Leases {
			if o.Now.Sub(l.CreatedAt) > o.LeaseAge {
				found = append(found, candidate{Leftover: Leftover{Kind: OldLease, Namespace: ns.Name, Name: l.ID,
					Why: fmt.Sprintf("a lease made %s ago; a pull or an import holds one for minutes", o.Now.Sub(l.CreatedAt).Round(time.Second))},
					roots: []ref{{kind: leaseRef, ns: ns.Name, id: l.ID}}})
			}
		}
		for _, b := range ns.Content {
			if _, ok := b.Labels[labelRoot]; ok {
				found = append(found, candidate{Leftover: Leftover{Kind: GCRoot, Namespace: ns.Name, Name: b.Digest,
					Why: "content labelled " + labelRoot + ", which the garbage collector never removes"},
					roots: []ref{{kind: contentRef, id: b.Digest}}})
			}
		}
		for _, s := range ns.Snapshots {
			if _, ok := s.Labels[labelRoot]; ok {
				found = append(found, candidate{Leftover: Leftover{Kind: GCRoot, Namespace: ns.Name, Name: s.Snapshotter + "/" + s.Key,
					Why: "a snapshot labelled " + labelRoot + ", which the garbage collector never removes"},
					roots: []ref{{kind: snapshotRef, ns: ns.Name, id: s.Snapshotter + "/" + s.Key}}})
			}
		}
	}
	all := g.roots()
	held := g.mark(all)
	var out []Leftover
	for _, c := range found {
		rest := slices.DeleteFunc(slices.Clone(all), func(r ref) bool { return slices.Contains(c.roots, r) })
		c.Bytes = g.size(held) - g.size(g.mark(rest))
		out = append(out, c.Leftover)
	}
	out = append(out, g.unreferenced(held)...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Namespace+out[i].Name < out[j].Namespace+out[j].Name
	})
	return out
}

type candidate struct {
	Leftover
	roots []ref
}

// images are the image leftovers of one namespace: in the kubelet's, the
// images whose every record is named by the ID; in any other, every image.
// An image's records (its tags, digests and ID) share their target.
func images(ns ctrdrecords.Namespace, o Options) []candidate {
	byTarget := map[string][]string{}
	var targets []string
	for _, img := range ns.Images {
		if byTarget[img.Target] == nil {
			targets = append(targets, img.Target)
		}
		byTarget[img.Target] = append(byTarget[img.Target], img.Name)
	}
	var out []candidate
	for _, t := range targets {
		names := byTarget[t]
		sort.Strings(names)
		var roots []ref
		for _, n := range names {
			roots = append(roots, ref{kind: imageRef, ns: ns.Name, id: n})
		}
		c := candidate{Leftover: Leftover{Namespace: ns.Name, Name: names[0]}, roots: roots}
		if len(names) > 1 {
			c.Name += fmt.Sprintf(" (and %d more names)", len(names)-1)
		}
		switch {
		case ns.Name != o.CRINamespace:
			c.Kind, c.Why = OtherNamespace, "an image in namespace "+ns.Name+", which the kubelet and the CRI do not see"
		case !slices.ContainsFunc(names, func(n string) bool { return !idName.MatchString(n) }):
			c.Kind, c.Why = UnnamedImage, "named only by its ID, with no name a pod can use: what a removal cut short leaves (containerd#13875)"
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

type refKind int

const (
	imageRef refKind = iota
	leaseRef
	containerRef
	contentRef
	snapshotRef
)

// ref names a record. Content is one blob on disk whatever the namespaces
// naming it, so its ref has no namespace; snapshots are a namespace's own.
type ref struct {
	kind   refKind
	ns, id string
}

// graph is what holds what, as containerd's garbage collector follows it.
type graph struct {
	edges   map[ref][]ref
	sizes   map[ref]int64
	rootSet []ref
}

func newGraph(r ctrdrecords.Records) *graph {
	g := &graph{edges: map[ref][]ref{}, sizes: map[ref]int64{}}
	for _, ns := range r.Namespaces {
		for _, img := range ns.Images {
			from := ref{kind: imageRef, ns: ns.Name, id: img.Name}
			g.rootSet = append(g.rootSet, from)
			g.edges[from] = append(g.edges[from], ref{kind: contentRef, id: img.Target})
		}
		for _, c := range ns.Containers {
			from := ref{kind: containerRef, ns: ns.Name, id: c.ID}
			g.rootSet = append(g.rootSet, from)
			if c.SnapshotKey != "" {
				g.edges[from] = append(g.edges[from], ref{kind: snapshotRef, ns: ns.Name, id: c.Snapshotter + "/" + c.SnapshotKey})
			}
			g.edges[from] = append(g.edges[from], labelRefs(ns.Name, c.Labels)...)
		}
		for _, l := range ns.Leases {
			from := ref{kind: leaseRef, ns: ns.Name, id: l.ID}
			g.rootSet = append(g.rootSet, from)
			for _, res := range l.Resources {
				switch {
				case res.Type == "content":
					g.edges[from] = append(g.edges[from], ref{kind: contentRef, id: res.ID})
				case strings.HasPrefix(res.Type, "snapshots/"):
					g.edges[from] = append(g.edges[from], ref{kind: snapshotRef, ns: ns.Name, id: strings.TrimPrefix(res.Type, "snapshots/") + "/" + res.ID})
				}
			}
		}
		for _, b := range ns.Content {
			at := ref{kind: contentRef, id: b.Digest}
			g.sizes[at] = b.Bytes
			if _, ok := b.Labels[labelRoot]; ok {
				g.rootSet = append(g.rootSet, at)
			}
			g.edges[at] = append(g.edges[at], labelRefs(ns.Name, b.Labels)...)
		}
		for _, s := range ns.Snapshots {
			at := ref{kind: snapshotRef, ns: ns.Name, id: s.Snapshotter + "/" + s.Key}
			g.sizes[at] = s.Bytes
			if _, ok := s.Labels[labelRoot]; ok {
				g.rootSet = append(g.rootSet, at)
			}
			if s.Parent != "" {
				g.edges[at] = append(g.edges[at], ref{kind: snapshotRef, ns: ns.Name, id: s.Snapshotter + "/" + s.Parent})
			}
			g.edges[at] = append(g.edges[at], labelRefs(ns.Name, s.Labels)...)
		}
	}
	return g
}

// labelRefs are what gc.ref labels point at: content by digest; a snapshot
// by key, the snapshotter named after the prefix (and before any "/").
func labelRefs(ns string, labels map[string]string) []ref {
	var out []ref
	for k, v := range labels {
		switch {
		case strings.HasPrefix(k, labelRefContent):
			out = append(out, ref{kind: contentRef, id: v})
		case strings.HasPrefix(k, labelRefSnapshot):
			sn, _, _ := strings.Cut(strings.TrimPrefix(k, labelRefSnapshot), "/")
			out = append(out, ref{kind: snapshotRef, ns: ns, id: sn + "/" + v})
		}
	}
	return out
}

func (g *graph) roots() []ref { return slices.Clone(g.rootSet) }

// mark is every record the roots hold, themselves included.
func (g *graph) mark(roots []ref) map[ref]bool {
	seen := map[ref]bool{}
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
func (g *graph) size(marked map[ref]bool) uint64 {
	var n uint64
	for r := range marked {
		if s := g.sizes[r]; s > 0 {
			n += uint64(s)
		}
	}
	return n
}

// unreferenced are the content and snapshots no root holds.
func (g *graph) unreferenced(held map[ref]bool) []Leftover {
	var out []Leftover
	for r, s := range g.sizes {
		if held[r] {
			continue
		}
		l := Leftover{Kind: Unreferenced, Namespace: r.ns, Name: r.id, Bytes: uint64(max(s, 0)),
			Why: "no image, container or lease holds it: containerd's garbage collector removes it at its next collection"}
		if r.kind == contentRef {
			l.Why = "content " + l.Why
		} else {
			l.Why = "a snapshot " + l.Why
		}
		out = append(out, l)
	}
	return out
}
