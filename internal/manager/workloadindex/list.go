package workloadindex

import (
	"context"
	"fmt"
	"unique"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// How the initial state is read. client-go's reflector (v0.37) streams it
// with a watch-list (the WatchListClient gate, on by default) into a
// temporary store keyed by every object's key, then hands that store's
// contents to Replace: at 300,000 pods a second copy of every key and a
// map, on top of the entries. Its list path, the fallback, gathers every
// page's decoded objects before storing any. So the reflector is told the
// client cannot stream (it then lists), and the list here streams itself:
// a watch with initial events, each event reduced to an entry and added to
// the set the index will swap in as it arrives (no list of every entry is
// held), until the bookmark that ends them. Where the API server refuses
// to stream (its WatchList gate off), it lists in pages, each reduced
// before the next is read.

// pageSize bounds one page of the list path: 500 pods decoded at once, a
// few megabytes, reduced to entries before the next page is asked for.
const pageSize = 500

// streamTimeout bounds the initial stream's watch; the reflector retries
// a list that fails.
const streamTimeout = 10 * 60

// lister is the reflector's ListerWatcher: it lists (listEntries), never
// watch-lists itself.
type lister struct{ *cache.ListWatch }

func (lister) IsWatchListSemanticsUnSupported() bool { return true }

// listWatch is the reflector's ListerWatcher for one kind.
func (i *Index) listWatch(s source) lister {
	return lister{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if !i.listOnly {
				l, err := i.streamEntries(ctx, s, o)
				if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
					return l, err
				}
				// An API server that cannot stream (WatchList gate off)
				// refuses sendInitialEvents as invalid.
			}
			i.stats.lists.Add(1)
			return i.listEntries(ctx, s, o)
		},
		WatchFuncWithContext: s.watch,
	}}
}

// streamEntries reads one kind's state as a stream of initial events.
func (i *Index) streamEntries(ctx context.Context, s source, o metav1.ListOptions) (runtime.Object, error) {
	rv := o.ResourceVersion
	if rv == "0" {
		// "Any version" is what the reflector's first list asks; a stream
		// starts at the most recent, consistent one.
		rv = ""
	}
	w, err := s.watch(ctx, metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true, TimeoutSeconds: ptr.To[int64](streamTimeout)})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	i.stats.streams.Add(1)
	set := newKindSet(s.kind)
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			return nil, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				return nil, fmt.Errorf("%s stream: bookmark: %w", s.kind, err)
			}
			if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				return setList(set, m.GetResourceVersion()), nil
			}
		default:
			e, d, ok := toEntry(ev.Object)
			if !ok {
				return nil, fmt.Errorf("%s stream: unexpected %T", s.kind, ev.Object)
			}
			if ev.Type == watch.Deleted {
				// Not sent before the initial events end; should one be, an
				// entry that does not count removes the object.
				e.images = unique.Handle[string]{}
			} else {
				i.drops.report(d)
			}
			set.add(e)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s stream: the watch ended before its initial events did", s.kind)
}

// listEntries lists one kind in pages, converting each page to entries.
// The pages are read from etcd (resourceVersion "" rather than "0", which
// the watch cache would answer whole, ignoring the limit): every page is of
// one snapshot, whose resource version the list carries.
func (i *Index) listEntries(ctx context.Context, s source, o metav1.ListOptions) (runtime.Object, error) {
	if o.ResourceVersion == "0" {
		o.ResourceVersion = ""
	}
	o.Limit, o.Continue = i.pageSize, ""
	set, rv := newKindSet(s.kind), ""
	for {
		page, err := s.list(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("listing %ss: %w", s.kind, err)
		}
		i.stats.pages.Add(1)
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return nil, err
		}
		if rv == "" {
			rv = lm.GetResourceVersion()
		}
		err = meta.EachListItem(page, func(obj runtime.Object) error {
			if e, d, ok := toEntry(obj); ok {
				i.drops.report(d)
				set.add(e)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if o.Continue = lm.GetContinue(); o.Continue == "" {
			return setList(set, rv), nil
		}
		// The continue token carries the snapshot's version.
		o.ResourceVersion, o.ResourceVersionMatch = "", ""
	}
}

// setList is what a list returns to the reflector: one entry carrying the
// set it built, which the reflector hands to Replace.
func setList(set *kindSet, rv string) *entryList {
	return &entryList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []*entry{{set: set}}}
}
