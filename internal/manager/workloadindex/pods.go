package workloadindex

import (
	"slices"
	"unique"
)

// podSets are the unfinished pods: by node, and unbound.
type podSets struct {
	// nodes: node name → its pods. A slice rather than a map: 24 bytes a
	// pod, where a map's slots and spare capacity cost about twice that,
	// and a node's tens of pods are searched as fast as hashed.
	// Node(name) costs the pods of that node only.
	nodes map[string][]podRef
	// unbound: the pods not yet scheduled, which belong to the cluster set:
	// any node may be asked to run them.
	unbound map[string]unique.Handle[string]
}

// podRef is one pod of a node.
type podRef struct {
	key    string
	images unique.Handle[string]
}

func newPodSets() podSets {
	return podSets{nodes: map[string][]podRef{}, unbound: map[string]unique.Handle[string]{}}
}

// set records (keep) or forgets a pod; it reports whether the unbound set
// is unchanged.
func (p *podSets) set(e *entry, keep bool) (unboundUnchanged bool) {
	if e.node == "" {
		return setIn(p.unbound, e.key, e.images, keep)
	}
	// Bound: a pod's node never changes once set, so only the unbound set
	// can hold it elsewhere.
	unboundUnchanged = setIn(p.unbound, e.key, e.images, false)
	refs := p.nodes[e.node]
	j := slices.IndexFunc(refs, func(r podRef) bool { return r.key == e.key })
	switch {
	case keep && j >= 0:
		refs[j].images = e.images
	case keep:
		p.nodes[e.node] = append(refs, podRef{key: e.key, images: e.images})
	case j >= 0 && len(refs) == 1:
		delete(p.nodes, e.node)
	case j >= 0:
		last := len(refs) - 1
		refs[j], refs[last] = refs[last], podRef{}
		p.nodes[e.node] = refs[:last]
	}
	return unboundUnchanged
}

// kindSet is one kind's objects as a list reads them, swapped in whole by
// Replace: built as the objects arrive, so that a sync never holds every
// object's entry beside the index it fills.
type kindSet struct {
	kind      kind
	pods      podSets
	templates map[string]unique.Handle[string]
}

func newKindSet(k kind) *kindSet {
	if k == kindPod {
		return &kindSet{kind: k, pods: newPodSets()}
	}
	return &kindSet{kind: k, templates: map[string]unique.Handle[string]{}}
}

// add records one object as it is, or forgets it when it does not count.
func (s *kindSet) add(e *entry) {
	if s.kind == kindPod {
		s.pods.set(e, e.counts())
		return
	}
	setIn(s.templates, e.key, e.images, e.counts())
}
