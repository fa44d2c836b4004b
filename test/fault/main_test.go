// Package fault_test is the manager's fault-injection tier: the real manager
// binary, built from ./cmd/manager as production runs it, against a real
// kube-apiserver and etcd, with faults injected around it (admission
// refusals, a quota, an API server restart, nodes coming and going, pods that
// never start, the leader killed). The tests play the node agents by writing
// the worker pods' status, and assert what a user sees: the ImageJob's and
// ImageList's status, the Events and the manager's log.
package fault_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/kname"
)

var env *testenv.Env

// TestMain shares among the tests the real manager binary and a control
// plane whose API server can be restarted, with kube-controller-manager's
// garbage collector beside it, so that owner references behave as in a
// cluster; each is made by the first test needing it.
func TestMain(m *testing.M) {
	// The tests' own clients log nothing worth reading; the manager under
	// test is a separate process with its own log.
	ctrllog.SetLogger(logr.Discard())
	code := testenv.Run(m, &env, testenv.Tier("fault"), testenv.WithRestartableAPIServer(), testenv.WithGarbageCollector())
	managertest.Binary.Remove()
	os.Exit(code)
}

// baseConfig is the EraserConfig of the scenarios: finished jobs are kept an
// hour for inspection (the scenario's cleanup deletes them).
const baseConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {imageJob: {podStartTimeout: %s, successRatio: %s, maxConcurrentNodes: %s, cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}%s}\n"

// config renders baseConfig; extra is more manager keys (", key: value").
func config(startTimeout, ratio, maxConcurrent, extra string) string {
	return fmt.Sprintf(baseConfig, startTimeout, ratio, maxConcurrent, extra)
}

// scenario is one test's world: its own namespace (the manager's, holding
// the worker pods and the leader lease), nodes and ImageList, all removed at
// the end so that the next scenario's manager does not see them.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	nodes []string
	list  string
	// written are the remover summaries the kubelet wrote, by node.
	mu      sync.Mutex
	written map[string]int
	// podUIDs are every pod UID seen per node: more than one is a pod
	// created twice.
	podUIDs map[string]map[string]bool
}

func newScenario(t *testing.T, ns string, nsLabels map[string]string) *scenario {
	t.Helper()
	testenv.Require(t)
	s := &scenario{t: t, ctx: context.Background(), ns: ns, list: ns + "-list",
		written: map[string]int{}, podUIDs: map[string]map[string]bool{}}
	err := env.Client.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The install's record, as the chart and manifest create it.
	if _, err := adoption.Since(s.ctx, env.Client, ns); err != nil {
		t.Fatal(err)
	}
	// Registered before any manager starts, so it runs after they are killed.
	t.Cleanup(s.cleanup)
	return s
}

func (s *scenario) cleanup() {
	ctx := s.ctx
	_ = env.Client.Delete(ctx, &eraserv1.ImageList{ObjectMeta: metav1.ObjectMeta{Name: s.list}})
	// By hand as well as by the garbage collector: the next scenario's
	// manager must not see them, and a control plane without one (outside
	// CI, no kube-controller-manager built) still ends clean.
	var jobs eraserv1.ImageJobList
	if env.Client.List(ctx, &jobs) == nil {
		for i := range jobs.Items {
			_ = env.Client.Delete(ctx, &jobs.Items[i])
		}
	}
	for _, n := range s.nodes {
		_ = env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	_ = env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.ns), client.GracePeriodSeconds(0))
}

// addNodes creates n nodes named prefix-000 on.
func (s *scenario) addNodes(prefix string, n int) []string {
	s.t.Helper()
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		if err := env.Client.Create(s.ctx, builder.MakeNode(name).Obj()); err != nil {
			s.t.Fatal(err)
		}
		names = append(names, name)
	}
	s.nodes = append(s.nodes, names...)
	return names
}

func (s *scenario) createList() {
	s.t.Helper()
	list := builder.MakeImageList(s.list).Images("docker.io/library/alpine:3.7.3").Obj()
	if err := env.Client.Create(s.ctx, list); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) getList() *eraserv1.ImageList {
	s.t.Helper()
	l := &eraserv1.ImageList{}
	if err := env.Client.Get(s.ctx, client.ObjectKey{Name: s.list}, l); err != nil {
		s.t.Fatal(err)
	}
	return l
}

// jobs are the ImageJobs of the scenario's list.
func (s *scenario) jobs() ([]eraserv1.ImageJob, error) {
	var jobs eraserv1.ImageJobList
	err := env.Client.List(s.ctx, &jobs, client.MatchingLabels{eraserv1.LabelImageList: kname.LabelValue(s.list)})
	return jobs.Items, err
}

// waitJob waits for the list's single job to satisfy cond, calling each
// (the kubelet, say) every round, and returns it.
func (s *scenario) waitJob(timeout time.Duration, what string, each func(), cond func(*eraserv1.ImageJob) bool) *eraserv1.ImageJob {
	s.t.Helper()
	var job *eraserv1.ImageJob
	testenv.WaitFor(s.t, timeout, what, func() bool {
		if each != nil {
			each()
		}
		jobs, err := s.jobs()
		if err != nil || len(jobs) == 0 {
			return false
		}
		if len(jobs) > 1 {
			s.t.Fatalf("%d jobs for one ImageList generation", len(jobs))
		}
		job = &jobs[0]
		return cond(job)
	})
	return job
}

func finished(j *eraserv1.ImageJob) bool {
	return j.Status.Phase == eraserv1.PhaseCompleted || j.Status.Phase == eraserv1.PhaseFailed
}

// waitRecorded waits for the ImageList to record its first run.
func (s *scenario) waitRecorded(timeout time.Duration) *eraserv1.ImageList {
	s.t.Helper()
	var l *eraserv1.ImageList
	testenv.WaitFor(s.t, timeout, "the ImageList to record the run", func() bool {
		l = &eraserv1.ImageList{}
		return env.Client.Get(s.ctx, client.ObjectKey{Name: s.list}, l) == nil && l.Status.ObservedGeneration == 1
	})
	return l
}

func ready(conds []metav1.Condition) metav1.Condition {
	if c := meta.FindStatusCondition(conds, eraserv1.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// fakeKubelet plays the node agents of the scenario's manager.
func (s *scenario) fakeKubelet() managertest.FakeKubelet {
	return managertest.FakeKubelet{Client: env.Client, Namespace: s.ns, Removed: removedOn}
}

// pods lists the scenario's worker pods; errors (the API server down) give
// nil.
func (s *scenario) pods() []corev1.Pod {
	pods, err := s.fakeKubelet().Pods(s.ctx)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pods {
		if s.podUIDs[p.Spec.NodeName] == nil {
			s.podUIDs[p.Spec.NodeName] = map[string]bool{}
		}
		s.podUIDs[p.Spec.NodeName][string(p.UID)] = true
	}
	return pods
}

// removedOn is the remover's count the kubelet reports for a node: varied,
// so that a node counted twice or not at all shows in the sum.
func removedOn(node string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return 1 + int(h.Sum32()%7)
}

// kubelet plays the node agents: every pending worker pod on a node that
// ok accepts (nil: every node) succeeds with a remover summary. Errors (the
// API server down, a conflict) are left for the next round.
func (s *scenario) kubelet(ok func(node string) bool) {
	s.kubeletPods(func(p *corev1.Pod) bool { return ok == nil || ok(p.Spec.NodeName) })
}

// kubeletPods is kubelet for the pods that ok accepts.
func (s *scenario) kubeletPods(ok func(*corev1.Pod) bool) {
	written, _ := s.fakeKubelet().FinishPods(s.ctx, s.pods(), ok)
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.written, written)
}

// writtenSum is the sum of the removed counts the kubelet reported.
func (s *scenario) writtenSum() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, r := range s.written {
		n += int64(r)
	}
	return n
}

// recreated lists the nodes that had more than one pod.
func (s *scenario) recreated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for node, uids := range s.podUIDs {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s (%d pods)", node, len(uids)))
		}
	}
	return out
}

// events are the Events about the named object: an ImageJob's and an
// ImageList's land in namespace "default", both being cluster-scoped.
func events(t *testing.T, kind, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventsUntil polls the Events about the named object until ok accepts
// them or the time is up, and returns the last it read: the manager's
// recorder sends Events asynchronously, after the status the test waited
// on. The caller's own checks report what is missing.
func eventsUntil(t *testing.T, kind, name string, within time.Duration, ok func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		evs := events(t, kind, name)
		if ok(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// findEvent returns the first Event with the reason whose message has every
// part.
func findEvent(evs []corev1.Event, reason string, parts ...string) *corev1.Event {
	for i, e := range evs {
		if e.Reason != reason {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.Message, p)
		}
		if all {
			return &evs[i]
		}
	}
	return nil
}

func describeEvents(evs []corev1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %s x%d: %.300s", e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// podCreates is how many pod creations the API server answered with the
// code ("403", "201"...) since it started.
func podCreates(t *testing.T, code string) int {
	t.Helper()
	return apiserverRequests(t, `resource="pods"`, `verb="POST"`, `subresource=""`, `code="`+code+`"`)
}

// apiserverRequests sums the API server's apiserver_request_total series
// whose labels hold every one of labels, since it started.
func apiserverRequests(t *testing.T, labels ...string) int {
	t.Helper()
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(strings.TrimSuffix(env.Config.Host, "/") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	n := 0
	for line := range strings.Lines(string(body)) {
		series, value, ok := strings.Cut(strings.TrimSpace(line), "} ")
		if !ok || !strings.HasPrefix(series, "apiserver_request_total{") || !containsAll(series, labels) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err == nil {
			n += int(v)
		}
	}
	return n
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
