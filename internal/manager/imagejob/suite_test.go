package imagejob

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/cacheopts"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/references"
	"github.com/eraser-oss/eraser/internal/wire/workerresult"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The fixture's informers log through controller-runtime.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, &env))
}

// fixture is one test's namespace, nodes and reconciler. Reconcile is called
// directly, and the test plays the kubelet by writing pod status.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	clock *clocktesting.FakeClock
	r     *Reconciler
	rec   *record.FakeRecorder
	// cached reads through an informer cache built exactly as the manager
	// builds its own (cacheopts.Options), trimming included.
	cached client.Client
	cache  cache.Cache
	stores *cacheopts.Stores
	// refs are the reference index the reconcilers are given.
	refs staticRefs
}

var nsCount int

func newFixture(t *testing.T) *fixture {
	t.Helper()
	testenv.Require(t)
	nsCount++
	ns := fmt.Sprintf("ij-%d-%d", time.Now().UnixNano()%100000, nsCount)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, ns: ns, clock: clocktesting.NewFakeClock(time.Now()), rec: record.NewFakeRecorder(1000)}
	f.startCache()
	f.r = f.newReconciler()
	t.Cleanup(func() {
		var nodes corev1.NodeList
		_ = env.Client.List(ctx, &nodes)
		for i := range nodes.Items {
			_ = env.Client.Delete(ctx, &nodes.Items[i])
		}
		var jobs eraserv1.ImageJobList
		_ = env.Client.List(ctx, &jobs)
		for i := range jobs.Items {
			_ = env.Client.Delete(ctx, &jobs.Items[i])
		}
	})
	return f
}

// startCache starts an informer cache with the manager's options for the
// fixture's namespace, and a client that reads through it and writes to the
// API server, as the manager's client does.
func (f *fixture) startCache() {
	f.t.Helper()
	opts, stores := cacheopts.Options(f.ns)
	opts.Scheme = env.Client.Scheme()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	f.t.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		f.t.Fatal("cache did not sync")
	}
	cl, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.cache, f.cached, f.stores = c, cl, stores
}

// newReconciler is a fresh reconciler, as after a manager restart: it reads
// through the cache and confirms with the API server, as in the manager.
// Each of set changes the fixture's options.
func (f *fixture) newReconciler(set ...func(*Options)) *Reconciler {
	o := Options{Namespace: f.ns, LogLevel: "info", References: &f.refs}
	for _, s := range set {
		s(&o)
	}
	return NewReconciler(f.cached, env.Client, f.stores, f.rec, f.clock, nil, o)
}

// events drains the Events recorded so far, one a line.
func (f *fixture) events() string {
	var b strings.Builder
	for {
		select {
		case e := <-f.rec.Events:
			b.WriteString(e + "\n")
		default:
			return b.String()
		}
	}
}

// staticRefs are a reference index whose sets the test sets.
type staticRefs struct {
	mu       sync.Mutex
	unsynced bool
	cluster  []references.Ref
	nodes    map[string][]references.Ref
}

func (s *staticRefs) Cluster() ([]references.Ref, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cluster), !s.unsynced
}

func (s *staticRefs) Node(name string) []references.Ref {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.nodes[name])
}

// settle waits until the cache has every change the test made to the
// objects the reconciler reads, so that a pass sees what the test just
// wrote, as a pass woken by the watch event would.
func (f *fixture) settle() {
	f.t.Helper()
	lists := []struct {
		list client.ObjectList
		opts []client.ListOption
	}{
		{&corev1.PodList{}, []client.ListOption{client.InNamespace(f.ns)}},
		// Report shards are not cached (cacheopts).
		{&corev1.ConfigMapList{}, []client.ListOption{client.InNamespace(f.ns), client.MatchingLabelsSelector{Selector: notReport}}},
		{&corev1.NodeList{}, nil},
		{&eraserv1.ImageJobList{}, nil},
	}
	versions := func(c client.Reader, l client.ObjectList, opts []client.ListOption) map[string]string {
		if err := c.List(f.ctx, l, opts...); err != nil {
			f.t.Fatal(err)
		}
		out := map[string]string{}
		_ = meta.EachListItem(l, func(o runtime.Object) error {
			m := o.(client.Object)
			out[m.GetName()] = m.GetResourceVersion()
			return nil
		})
		return out
	}
	for _, l := range lists {
		want := versions(env.Client, l.list.DeepCopyObject().(client.ObjectList), l.opts)
		testenv.WaitFor(f.t, time.Minute, fmt.Sprintf("the cache to catch up with %T", l.list), func() bool {
			return maps.Equal(want, versions(f.cache, l.list.DeepCopyObject().(client.ObjectList), l.opts))
		})
	}
}

func (f *fixture) nodes(nodes ...*corev1.Node) {
	f.t.Helper()
	for _, n := range nodes {
		if err := env.Client.Create(f.ctx, n); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) manyNodes(n int, prefix string) {
	for i := range n {
		f.nodes(builder.MakeNode(fmt.Sprintf("%s-%03d", prefix, i)).Obj())
	}
}

// job creates an ImageJob and its data, with the EraserConfig doc.
func (f *fixture) job(name string, kind podspec.Kind, doc string, images ...string) *eraserv1.ImageJob {
	f.t.Helper()
	job := builder.MakeImageJob(name).Obj()
	if err := env.Client.Create(f.ctx, job); err != nil {
		f.t.Fatal(err)
	}
	if err := jobdata.Create(f.ctx, env.Client, f.ns, job, jobdata.Data{Kind: kind, Images: images, Raw: []byte(doc)}); err != nil {
		f.t.Fatal(err)
	}
	return job
}

func (f *fixture) reconcile(name string) reconcile.Result {
	f.t.Helper()
	f.clock.Step(passInterval) // past the throttle between passes
	f.settle()
	res, err := f.r.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	if err != nil {
		f.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

func (f *fixture) get(name string) *eraserv1.ImageJob {
	f.t.Helper()
	job := &eraserv1.ImageJob{}
	if err := env.Client.Get(f.ctx, client.ObjectKey{Name: name}, job); err != nil {
		f.t.Fatal(err)
	}
	return job
}

func (f *fixture) pods(job string) []corev1.Pod {
	f.t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(f.ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{podspec.LabelJob: job}); err != nil {
		f.t.Fatal(err)
	}
	return pods.Items
}

// finishPod plays the kubelet: the pod ends in phase, with the remover's
// summary as its termination message.
func (f *fixture) finishPod(pod *corev1.Pod, phase corev1.PodPhase, summary *workerresult.Summary) {
	f.t.Helper()
	pod.Status.Phase = phase
	exit := int32(0)
	if phase == corev1.PodFailed {
		exit = 1
	}
	term := &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Completed"}
	if summary != nil {
		term.Message = string(summary.Encode())
	}
	if exit != 0 {
		term.Reason = "Error"
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.RemoverContainer, State: corev1.ContainerState{Terminated: term}}}
	if err := env.Client.Status().Update(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) runPod(pod *corev1.Pod) {
	f.t.Helper()
	start := metav1.NewTime(f.clock.Now())
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &start
	if err := env.Client.Status().Update(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
}

func removed(n int, bytes uint64) *workerresult.Summary {
	return &workerresult.Summary{Component: "remover", Counts: map[string]int{"removed": n, "in use": 1}, BytesFreed: bytes}
}

var notReport = func() labels.Selector {
	s, err := labels.Parse("!" + eraserv1.LabelReport + ",!" + eraserv1.LabelReferences)
	if err != nil {
		panic(err)
	}
	return s
}()

const baseConfig = "apiVersion: eraser.sh/v1alpha3\n"

func metav1IsControlledBy(o client.Object, owner client.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}
