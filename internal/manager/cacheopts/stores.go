package cacheopts

import (
	"errors"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// Stores reads the cache's worker pods and nodes in place, for the pass over
// a running job that visits every one of them. A List through the cache
// copies each object it returns into the list: on 10,000 nodes that was two
// thirds of the manager's CPU (the copies and their garbage), for a pass
// that only reads. What Stores returns is the cache's own object, shared
// with every other reader: it must not be modified.
//
// Reads are as fresh as the cache's (the informer updates its store before
// it tells any event handler), so a pass woken by a pod's event sees it.
type Stores struct {
	mu    sync.RWMutex
	pods  []toolscache.SharedIndexInformer
	nodes toolscache.SharedIndexInformer
}

// indexJob indexes worker pods by their job's name; indexBusy indexes the
// unfinished ones by their node (one worker per node across runs).
const (
	indexJob  = "job"
	indexBusy = "busy"
)

// ErrNotSynced is returned until the informer a read needs has been created
// and has synced: a reconciler retries (the controller starts its workers
// only once its watches synced, so in a manager this is not seen).
var ErrNotSynced = errors.New("the informer cache has not synced yet")

// newInformer builds the cache's informers as controller-runtime would, and
// keeps the pod and node ones (with a job index on pods).
func (s *Stores) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	_, isPod := obj.(*corev1.Pod)
	_, isNode := obj.(*corev1.Node)
	if isPod {
		indexers = maps.Clone(indexers)
		if indexers == nil {
			indexers = toolscache.Indexers{}
		}
		indexers[indexJob] = jobIndex
		indexers[indexBusy] = busyIndex
	}
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	s.mu.Lock()
	defer s.mu.Unlock()
	if isPod {
		// One informer per namespace the pods are cached in.
		s.pods = append(s.pods, inf)
	}
	if isNode {
		s.nodes = inf
	}
	return inf
}

func jobIndex(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if job := pod.Labels[podspec.LabelJob]; job != "" {
		return []string{job}, nil
	}
	return nil, nil
}

// busyIndex keys an unfinished worker pod by its node. A pod being deleted
// still holds its node until it has finished or is gone.
func busyIndex(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[podspec.LabelJob] == "" || pod.Spec.NodeName == "" || podspec.Finished(pod) {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// JobPods returns the cached worker pods of a job, read-only.
func (s *Stores) JobPods(job string) ([]*corev1.Pod, error) {
	return s.podsByIndex(indexJob, job)
}

// syncedPods returns the pod informers once every one has synced.
func (s *Stores) syncedPods() ([]toolscache.SharedIndexInformer, error) {
	s.mu.RLock()
	informers := s.pods
	s.mu.RUnlock()
	if len(informers) == 0 {
		return nil, ErrNotSynced
	}
	for _, inf := range informers {
		if !inf.HasSynced() {
			return nil, ErrNotSynced
		}
	}
	return informers, nil
}

func (s *Stores) podsByIndex(index, key string) ([]*corev1.Pod, error) {
	informers, err := s.syncedPods()
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, inf := range informers {
		objs, err := inf.GetIndexer().ByIndex(index, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if pod, ok := o.(*corev1.Pod); ok {
				out = append(out, pod)
			}
		}
	}
	return out, nil
}

// BusyOn returns the cached unfinished worker pods on a node, of every job,
// read-only.
func (s *Stores) BusyOn(node string) ([]*corev1.Pod, error) {
	return s.podsByIndex(indexBusy, node)
}

// Busy counts the cached unfinished worker pods of every job.
func (s *Stores) Busy() (int, error) {
	informers, err := s.syncedPods()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, inf := range informers {
		for _, node := range inf.GetIndexer().ListIndexFuncValues(indexBusy) {
			objs, err := inf.GetIndexer().ByIndex(indexBusy, node)
			if err != nil {
				return 0, err
			}
			n += len(objs)
		}
	}
	return n, nil
}

// NodeExists reports whether the cache holds the node.
func (s *Stores) NodeExists(name string) (bool, error) {
	n, err := s.Node(name)
	return n != nil, err
}

// Node returns the cached (trimmed) node, read-only, or nil when the cache
// does not hold it.
func (s *Stores) Node(name string) (*corev1.Node, error) {
	s.mu.RLock()
	inf := s.nodes
	s.mu.RUnlock()
	if inf == nil || !inf.HasSynced() {
		return nil, ErrNotSynced
	}
	obj, ok, err := inf.GetIndexer().GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	n, _ := obj.(*corev1.Node)
	return n, nil
}
