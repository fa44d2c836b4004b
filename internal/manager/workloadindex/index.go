// Package workloadindex is the manager's index of the images the cluster
// references: those of every unfinished pod, by the node it is bound to, and
// those of workload templates (Deployments, StatefulSets, DaemonSets,
// ReplicaSets with replicas, unfinished Jobs, CronJobs).
//
// It watches those kinds cluster-wide with client-go reflectors of its own,
// in protobuf, and keeps of each object only its key, its node and its
// images, interned: at 300,000 pods a decoded pod per entry would be
// gigabytes, an entry is tens of bytes. The initial state is streamed (a
// watch with initial events, each reduced to an entry as it arrives: see
// list.go), never listed in one response; where the API server cannot
// stream, it is listed in pages, each reduced before the next is read.
package workloadindex

import (
	"slices"
	"strings"
	"sync"
	"unique"

	"k8s.io/client-go/tools/record"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/eraser-oss/eraser/internal/wire/references"
)

// Index holds the images. Its methods are safe for concurrent use: the
// reflectors write, the imagejob reconciler's pod builders read.
type Index struct {
	mu   sync.RWMutex
	pods podSets
	// templates: per workload kind, key → images.
	templates [numKinds]map[string]unique.Handle[string]
	synced    [numKinds]bool
	// cluster caches Cluster's answer until a template or an unbound pod
	// changes; fresh says whether it is current.
	cluster []references.Ref
	fresh   bool

	// sources are the watches Start runs (New sets them).
	sources []source
	// drops tells of images left out; events and eventSink send its
	// Events (New sets them).
	drops     *dropReporter
	events    record.EventBroadcaster
	eventSink record.EventSink
	stats     counters
	// pageSize is the list path's page; listOnly takes that path instead
	// of streaming (tests).
	pageSize int64
	listOnly bool
}

func newIndex() *Index {
	i := &Index{pageSize: pageSize, pods: newPodSets(), drops: newDropReporter(ctrllog.Log.WithName("reference-index"))}
	for k := range i.templates {
		i.templates[k] = map[string]unique.Handle[string]{}
	}
	return i
}

// Cluster is the cluster set: one Ref per image of a workload template or
// an unscheduled pod, sorted as references.Dedupe sorts. ok is false until
// every kind has synced. The slice is the caller's.
func (i *Index) Cluster() (refs []references.Ref, ok bool) {
	i.mu.RLock()
	if !i.allSynced() {
		i.mu.RUnlock()
		return nil, false
	}
	if i.fresh {
		refs = slices.Clone(i.cluster)
		i.mu.RUnlock()
		return refs, true
	}
	i.mu.RUnlock()
	i.mu.Lock()
	defer i.mu.Unlock()
	if !i.fresh {
		i.cluster, i.fresh = i.buildCluster(), true
	}
	return slices.Clone(i.cluster), true
}

func (i *Index) allSynced() bool {
	for _, s := range i.synced {
		if !s {
			return false
		}
	}
	return true
}

// buildCluster collects the cluster set; the caller holds the write lock.
func (i *Index) buildCluster() []references.Ref {
	var refs []references.Ref
	for k := kindDeployment; k < numKinds; k++ {
		for key, images := range i.templates[k] {
			refs = appendRefs(refs, k, key, images)
		}
	}
	for key, images := range i.pods.unbound {
		refs = appendRefs(refs, kindPod, key, images)
	}
	// One owner per image is all a worker reports; the set is held until
	// it changes, so it is held deduplicated. Clip: callers append.
	return slices.Clip(references.Dedupe(refs))
}

// Node is the node set: one Ref per image of the unfinished pods bound to
// the node, sorted as references.Dedupe sorts.
func (i *Index) Node(name string) []references.Ref {
	i.mu.RLock()
	var refs []references.Ref
	for _, p := range i.pods.nodes[name] {
		refs = appendRefs(refs, kindPod, p.key, p.images)
	}
	i.mu.RUnlock()
	return references.Dedupe(refs)
}

// appendRefs appends one Ref per image of one object. The images are
// substrings of the interned list: no copy.
func appendRefs(refs []references.Ref, k kind, key string, images unique.Handle[string]) []references.Ref {
	ns, name, _ := strings.Cut(key, "/")
	owner := references.Owner(k.String(), ns, name)
	for img := range strings.SplitSeq(images.Value(), "\n") {
		refs = append(refs, references.Ref{Image: img, Owner: owner})
	}
	return refs
}

// put records one object as it is now: an entry that does not count is
// removed.
func (i *Index) put(k kind, e *entry) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.set(k, e, e.counts())
}

// remove forgets one object.
func (i *Index) remove(k kind, e *entry) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.set(k, e, false)
}

// set records or forgets e; the caller holds the write lock.
func (i *Index) set(k kind, e *entry, keep bool) {
	if k == kindPod {
		i.fresh = i.pods.set(e, keep) && i.fresh
		return
	}
	i.fresh = setIn(i.templates[k], e.key, e.images, keep) && i.fresh
}

// setIn records (keep) or deletes key in m; it reports whether m is
// unchanged, so that a Deployment's status update, say, leaves the cluster
// set cached.
func setIn(m map[string]unique.Handle[string], key string, images unique.Handle[string], keep bool) (unchanged bool) {
	old, had := m[key]
	if !keep {
		delete(m, key)
		return !had
	}
	m[key] = images
	return had && old == images
}

// replace swaps one kind's objects for a full list (a sync or relist):
// a set the list built as it read (an entry carrying it), and any entries.
func (i *Index) replace(k kind, entries []*entry) {
	var set *kindSet
	for _, e := range entries {
		switch {
		case e.set != nil:
			set = e.set
		case set == nil:
			set = newKindSet(k)
			fallthrough
		default:
			set.add(e)
		}
	}
	if set == nil {
		set = newKindSet(k)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if k == kindPod {
		i.pods = set.pods
	} else {
		i.templates[k] = set.templates
	}
	i.synced[k], i.fresh = true, false
}

// Synced is whether every kind has been listed once.
func (i *Index) Synced() bool {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.allSynced()
}
