package leftover

import (
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/eraser-oss/eraser/internal/node/containerdrecords"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

var idName = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// IsIDName tells an image record named by the image's ID (its config's
// digest), the name containerd's CRI gives it beside its tags and digests.
func IsIDName(name string) bool { return idName.MatchString(name) }

// Containerd finds the leftovers in containerd's records, largest first.
func Containerd(r containerdrecords.Records, o Options) []Leftover {
	g := containerdrecords.NewGraph(r)
	var found []candidate
	for _, ns := range r.Namespaces {
		found = append(found, images(ns, o)...)
		for _, l := range ns.Leases {
			kind, why := JudgeLease(l, o.LeaseAge, o.Now)
			// Other namespaces' held leases are their owners' (Docker's,
			// BuildKit's, by the thousand): not listed.
			if kind == "" || kind == leftoverkind.HeldLease && ns.Name != o.CRINamespace {
				continue
			}
			read := l
			found = append(found, candidate{Leftover: Leftover{Kind: kind, Namespace: ns.Name, Name: l.ID, Why: why, Lease: &read},
				refs: []containerdrecords.Ref{{Kind: containerdrecords.LeaseRef, Namespace: ns.Name, ID: l.ID}}})
		}
		for _, b := range ns.Content {
			if _, ok := b.Labels[containerdrecords.LabelRoot]; ok {
				found = append(found, candidate{Leftover: Leftover{Kind: leftoverkind.GCRoot, Namespace: ns.Name, Name: b.Digest,
					Why: "content labelled " + containerdrecords.LabelRoot + ", which the garbage collector never removes"},
					refs: []containerdrecords.Ref{{Kind: containerdrecords.ContentRef, Namespace: ns.Name, ID: b.Digest}}})
			}
		}
		for _, s := range ns.Snapshots {
			if _, ok := s.Labels[containerdrecords.LabelRoot]; ok {
				found = append(found, candidate{Leftover: Leftover{Kind: leftoverkind.GCRoot, Namespace: ns.Name, Name: s.Snapshotter + "/" + s.Key,
					Why: "a snapshot labelled " + containerdrecords.LabelRoot + ", which the garbage collector never removes"},
					refs: []containerdrecords.Ref{{Kind: containerdrecords.SnapshotRef, Namespace: ns.Name, ID: s.Snapshotter + "/" + s.Key}}})
			}
		}
	}
	var out []Leftover
	for _, c := range found {
		c.Bytes = g.Exclusive(c.refs)
		out = append(out, c.Leftover)
	}
	for _, u := range g.Unheld() {
		l := Leftover{Kind: leftoverkind.Unreferenced, Namespace: u.Namespace, Name: u.ID, Bytes: u.Bytes,
			Why: "a snapshot no image, container or lease holds: containerd's garbage collector removes it at its next collection"}
		if u.Kind == containerdrecords.ContentRef {
			l.Why = "content no image, container or lease holds: containerd's garbage collector removes it at its next collection"
		}
		out = append(out, l)
	}
	sortLargestFirst(out)
	return out
}

// sortLargestFirst orders leftovers by the bytes they hold, then by name.
func sortLargestFirst(out []Leftover) {
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Namespace+out[i].Name < out[j].Namespace+out[j].Name
	})
}

type candidate struct {
	Leftover
	refs []containerdrecords.Ref
}

// images are the image leftovers of one namespace: in the kubelet's, the
// images whose every record is named by the ID; in any other, every image.
// An image's records (its tags, digests and ID) share their target.
func images(ns containerdrecords.Namespace, o Options) []candidate {
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
		var refs []containerdrecords.Ref
		for _, n := range names {
			refs = append(refs, containerdrecords.Ref{Kind: containerdrecords.ImageRef, Namespace: ns.Name, ID: n})
		}
		targets := make(map[string]string, len(names))
		for _, n := range names {
			targets[n] = t
		}
		c := candidate{Leftover: Leftover{Namespace: ns.Name, Name: names[0], Records: names, Targets: targets}, refs: refs}
		if len(names) > 1 {
			c.Name += fmt.Sprintf(" (and %d more names)", len(names)-1)
		}
		switch {
		case ns.Name != o.CRINamespace:
			c.Kind, c.Why = leftoverkind.OtherNamespace, "an image in namespace "+ns.Name+", which the kubelet and the CRI do not see"
		case !slices.ContainsFunc(names, func(n string) bool { return !IsIDName(n) }):
			c.Kind, c.Why = leftoverkind.UnnamedImage, "named only by its ID, with no name a pod can use: what a removal cut short leaves (containerd#13875)"
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}
