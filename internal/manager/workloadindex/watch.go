package workloadindex

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/eraser-oss/eraser/internal/manager/podspec"
)

// The index reads pods and workloads in every namespace.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list;watch

// source is the watch of one kind.
type source struct {
	kind    kind
	example runtime.Object
	list    cache.ListWithContextFunc
	watch   cache.WatchFuncWithContext
}

// counters say how the index was filled: a test checks that the initial
// state was streamed, not listed.
type counters struct {
	streams, lists, pages atomic.Int64
}

// Stats are the counters and sizes of the index.
type Stats struct {
	// Streams are watches opened with initial events (the reflector's
	// watch-list); Lists and Pages the list path's calls and pages.
	Streams, Lists, Pages int64
	// Pods and Nodes held (unfinished pods: bound, and their nodes;
	// unbound), Templates held.
	BoundPods, Nodes, UnboundPods, Templates int
	// ClusterCached: the cluster set is cached, Cluster() will not build
	// it.
	ClusterCached bool
}

// Stats reports the counters and sizes.
func (i *Index) Stats() Stats {
	i.mu.RLock()
	defer i.mu.RUnlock()
	s := Stats{Streams: i.stats.streams.Load(), Lists: i.stats.lists.Load(), Pages: i.stats.pages.Load(),
		Nodes: len(i.pods.nodes), UnboundPods: len(i.pods.unbound), ClusterCached: i.fresh}
	for _, m := range i.pods.nodes {
		s.BoundPods += len(m)
	}
	for k := kindDeployment; k < numKinds; k++ {
		s.Templates += len(i.templates[k])
	}
	return s
}

// New is an index of the cluster that cfg reaches; Start runs it.
func New(cfg *rest.Config) (*Index, error) {
	cfg = rest.CopyConfig(cfg)
	// Protobuf: decoding 300,000 pods from JSON takes several times longer
	// and allocates more.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("reference index client: %w", err)
	}
	i := newIndex()
	i.sources = sources(cs)
	// Events on the objects whose images were left out, from a broadcaster
	// of the index's own: it reaches every namespace, where the manager's
	// recorder serves its own objects.
	i.events = record.NewBroadcaster()
	i.drops.recorder = i.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "eraser-manager"})
	i.eventSink = &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(metav1.NamespaceAll)}
	return i, nil
}

// sources are the watches of every kind: one filtered list-watch per row,
// on the REST client of the kind's group.
func sources(cs kubernetes.Interface) []source {
	clients := map[string]cache.Getter{
		"v1":       cs.CoreV1().RESTClient(),
		"apps/v1":  cs.AppsV1().RESTClient(),
		"batch/v1": cs.BatchV1().RESTClient(),
	}
	watched := [numKinds]struct {
		resource string
		example  runtime.Object
		narrow   func(*metav1.ListOptions)
	}{
		kindPod:         {"pods", &corev1.Pod{}, notWorkers},
		kindDeployment:  {"deployments", &appsv1.Deployment{}, everything},
		kindStatefulSet: {"statefulsets", &appsv1.StatefulSet{}, everything},
		kindDaemonSet:   {"daemonsets", &appsv1.DaemonSet{}, everything},
		kindReplicaSet:  {"replicasets", &appsv1.ReplicaSet{}, everything},
		kindJob:         {"jobs", &batchv1.Job{}, everything},
		kindCronJob:     {"cronjobs", &batchv1.CronJob{}, everything},
	}
	out := make([]source, 0, numKinds)
	for k, w := range watched {
		lw := cache.NewFilteredListWatchFromClient(clients[kind(k).apiVersion()], w.resource, metav1.NamespaceAll, w.narrow)
		out = append(out, source{kind: kind(k), example: w.example, list: lw.ListWithContextFunc, watch: lw.WatchFuncWithContext})
	}
	return out
}

// workerSelector leaves out eraser's own worker pods, selected by the API
// server so that they are never sent: at 10,000 nodes a wave is 10,000 pods
// of several KiB each (their node's set is in an annotation), and the
// manager's cache already receives them once. Their images protect nothing a
// node needs: a worker runs on its own node, where the in-use check keeps its
// images, and its peers on other nodes do not count for this one.
const workerSelector = "!" + podspec.LabelJob

// notWorkers narrows a pod list or watch to no worker pod; every path
// (list, stream, watch) goes through it.
func notWorkers(o *metav1.ListOptions) { o.LabelSelector = workerSelector }

// everything leaves a workload kind's list or watch as the caller asked.
func everything(*metav1.ListOptions) {}

// Start runs the watches until ctx is done (manager.Runnable). It fails at
// once where the manager may not list a kind: a reflector would retry that
// for ever, and every run would wait for an index that never syncs.
func (i *Index) Start(ctx context.Context) error {
	if err := i.allowed(ctx); err != nil {
		return err
	}
	if i.events != nil {
		i.events.StartRecordingToSink(i.eventSink)
		defer i.events.Shutdown()
	}
	var wg sync.WaitGroup
	for _, s := range i.sources {
		r := cache.NewReflectorWithOptions(i.listWatch(s), s.example, &store{idx: i, kind: s.kind},
			cache.ReflectorOptions{Name: "workloadindex/" + s.kind.String()})
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// allowed lists one object of each kind, so that a role without the rules
// is an error that says so. Other errors are left to the reflectors'
// retries.
func (i *Index) allowed(ctx context.Context) error {
	for _, s := range i.sources {
		if _, err := s.list(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
			return fmt.Errorf("the reference index may not list %s in every namespace (%w): the manager's ClusterRole lacks the read rules that protecting referenced images needs; "+
				"install with the chart's rbac.workloadProtection: true, or set manager.retention.protectReferenced: false and run the manager with --reference-index=false", s.kind, err)
		}
	}
	return nil
}

// NeedLeaderElection: only the leader runs jobs, so only it needs the
// index, and a standby replica should not hold 300,000 pods' worth of it.
func (i *Index) NeedLeaderElection() bool { return true }

// store is the reflector's store for one kind: it converts each object to
// an entry and keeps nothing else.
type store struct {
	idx  *Index
	kind kind
}

var _ cache.TransformingStore = (*store)(nil)

// Transformer converts the objects the reflector's watch-list would gather
// in its temporary store (listWatch turns it off: the index streams in its
// list instead, without that store's copy of every key): should it ever
// run, that store holds entries, not decoded pods.
func (s *store) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) {
		e, d, ok := toEntry(obj)
		if !ok {
			return nil, fmt.Errorf("reference index: unexpected %T in the %s watch", obj, s.kind)
		}
		s.idx.drops.report(d)
		return e, nil
	}
}

func (s *store) entry(obj any) (*entry, drop, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	e, d, ok := toEntry(obj)
	if !ok {
		return nil, d, fmt.Errorf("reference index: unexpected %T in the %s watch", obj, s.kind)
	}
	return e, d, nil
}

func (s *store) Add(obj any) error {
	e, d, err := s.entry(obj)
	if err != nil {
		return err
	}
	s.idx.drops.report(d)
	s.idx.put(s.kind, e)
	return nil
}

func (s *store) Update(obj any) error { return s.Add(obj) }

func (s *store) Delete(obj any) error {
	e, _, err := s.entry(obj)
	if err != nil {
		return err
	}
	s.idx.remove(s.kind, e)
	return nil
}

func (s *store) Replace(list []any, _ string) error {
	entries := make([]*entry, 0, len(list))
	for _, obj := range list {
		e, d, err := s.entry(obj)
		if err != nil {
			return err
		}
		s.idx.drops.report(d)
		entries = append(entries, e)
	}
	s.idx.replace(s.kind, entries)
	return nil
}

func (s *store) Resync() error { return nil }
