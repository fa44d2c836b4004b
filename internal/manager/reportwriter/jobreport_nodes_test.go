package reportwriter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

func targets(names ...string) []nodefilter.Target {
	out := make([]nodefilter.Target, len(names))
	for i, n := range names {
		out[i] = nodefilter.Target{Name: n, OS: "linux"}
	}
	return out
}

// withWaiting sets the nodes that waited for their pod, as indexes into the
// node list ("1,3").
func withWaiting(job *eraserv1.ImageJob, indexes string) *eraserv1.ImageJob {
	job.Status.WaitingIndexes = indexes
	return job
}

func readyCondition(reason string) metav1.Condition {
	return metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: "the run failed"}
}

// TestMissing: every node of the job that has no log is named, with why;
// a node that never had a worker pod is NotStarted with its cause, never
// succeeded.
func TestMissing(t *testing.T) {
	restored := fmt.Sprintf("status.failedIndexes records the reason; status.failedNodes names only the first %d", eraserv1.MaxReportedNodes)
	const (
		budgetStopped  = "the run ended before it reached this node: the failure budget (maxFailedNodes) stopped it"
		waitedOnBudget = "this node waited for its worker pod (another run's worker was on the node or queued for it first, " +
			"or the bound on worker pods in flight left no room) when the run ended: the failure budget (maxFailedNodes) stopped it"
		gaveUp = "the run gave up waiting to create this node's worker pod (the job counts the node failed): "
	)
	nodes := &jobdata.Nodes{Targets: targets("a", "b", "c", "d", "e", "f"),
		Skipped: []nodefilter.Skipped{{Name: "s1", Reason: eraserv1.ReasonNotReady}, {Name: "s2", Reason: eraserv1.ReasonTainted, Detail: "gpu=true:NoSchedule"}}}
	halted := func() *builder.ImageJobWrapper {
		return builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Started(4).Condition(readyCondition(eraserv1.ReasonFailureBudgetExceeded))
	}
	for name, tc := range map[string]struct {
		job     *eraserv1.ImageJob
		nodes   *jobdata.Nodes
		written map[string]bool
		want    []nodereport.Node
	}{
		"every kind of node without a log": {
			// a written; b named in failedNodes; c only in failedIndexes;
			// d reached, no pod, not failed; e and f never reached, the
			// job giving no reason it ended.
			job: builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Started(4).
				FailedNode("b", "StartTimeout", "did not start within 10m").FailedIndexes("StartTimeout", "1").FailedIndexes("RunTimeout", "2").Obj(),
			nodes: nodes, written: map[string]bool{"a": true},
			want: []nodereport.Node{
				{Name: "b", Failed: true, Reason: "StartTimeout", Message: "did not start within 10m", Unavailable: noPodFailed},
				{Name: "c", Failed: true, Reason: "RunTimeout", Message: restored, Unavailable: noPodFailed},
				{Name: "d", Unavailable: noPodSucceeded},
				{Name: "e", Reason: "NotStarted/RunEnded", Message: "the run ended before it reached this node: the job gives no reason"},
				{Name: "f", Reason: "NotStarted/RunEnded", Message: "the run ended before it reached this node: the job gives no reason"},
				{Name: "s1", Reason: "Skipped/NotReady", Message: "the job left this node out"},
				{Name: "s2", Reason: "Skipped/Tainted", Message: "the job left this node out: gpu=true:NoSchedule"},
			},
		},
		"halted by the failure budget, with nodes still waiting": {
			// a ran; b and d waited when the budget stopped the run (c's
			// failure made it so), b first, behind run other; e and f
			// never reached.
			job:   withWaiting(halted().Waiting(2, "other").FailedNode("c", "PodFailed", "exit 1").Obj(), "1,3"),
			nodes: &jobdata.Nodes{Targets: targets("a", "b", "c", "d", "e", "f")}, written: map[string]bool{"a": true},
			want: []nodereport.Node{
				{Name: "b", Reason: "NotStarted/Waiting", Message: waitedOnBudget + "; it waited behind run other"},
				{Name: "c", Failed: true, Reason: "PodFailed", Message: "exit 1", Unavailable: noPodFailed},
				{Name: "d", Reason: "NotStarted/Waiting", Message: waitedOnBudget + "; the run's first waiting node waited behind run other"},
				{Name: "e", Reason: "NotStarted/FailureBudgetExceeded", Message: budgetStopped},
				{Name: "f", Reason: "NotStarted/FailureBudgetExceeded", Message: budgetStopped},
			},
		},
		"halted, waiting behind no named run": {
			// The budget's halt clears the run each node waits behind.
			job:   withWaiting(halted().Obj(), "0-1"),
			nodes: &jobdata.Nodes{Targets: targets("a", "b", "c", "d", "e")}, written: map[string]bool{"c": true, "d": true},
			want: []nodereport.Node{
				{Name: "a", Reason: "NotStarted/Waiting", Message: waitedOnBudget},
				{Name: "b", Reason: "NotStarted/Waiting", Message: waitedOnBudget},
				{Name: "e", Reason: "NotStarted/FailureBudgetExceeded", Message: budgetStopped},
			},
		},
		"a waiting index at or past started is not reached": {
			job:   withWaiting(halted().Started(1).Obj(), "1,7"),
			nodes: &jobdata.Nodes{Targets: targets("a", "b")}, written: map[string]bool{"a": true},
			want: []nodereport.Node{{Name: "b", Reason: "NotStarted/FailureBudgetExceeded", Message: budgetStopped}},
		},
		"given up waiting: not started, with the failure's message": {
			// b named with its message, c only in failedIndexes; neither
			// is a failed pod.
			job: halted().Started(3).FailedNode("b", eraserv1.ReasonWaitTimedOut, "run x's pod on the node did not go within 10m").
				FailedIndexes(eraserv1.ReasonWaitTimedOut, "1-2").Obj(),
			nodes: &jobdata.Nodes{Targets: targets("a", "b", "c", "d")}, written: map[string]bool{"a": true},
			want: []nodereport.Node{
				{Name: "b", Reason: "NotStarted/WaitTimedOut", Message: gaveUp + "run x's pod on the node did not go within 10m"},
				{Name: "c", Reason: "NotStarted/WaitTimedOut", Message: gaveUp + restored},
				{Name: "d", Reason: "NotStarted/FailureBudgetExceeded", Message: budgetStopped},
			},
		},
		"ended for another reason before any wave": {
			job:   builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Condition(readyCondition("PodsRefused")).Obj(),
			nodes: &jobdata.Nodes{Targets: targets("a", "b")},
			want: []nodereport.Node{
				{Name: "a", Reason: "NotStarted/PodsRefused", Message: "the run ended before it reached this node: the job failed with PodsRefused"},
				{Name: "b", Reason: "NotStarted/PodsRefused", Message: "the run ended before it reached this node: the job failed with PodsRefused"},
			},
		},
		"all written": {
			job:     builder.MakeImageJob("j").Phase(eraserv1.PhaseCompleted).Started(6).Obj(),
			nodes:   &jobdata.Nodes{Targets: targets("a", "b")},
			written: map[string]bool{"a": true, "b": true},
		},
		"an index past the list is ignored": {
			job:   builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Started(1).FailedIndexes("PodFailed", "0,9").Obj(),
			nodes: &jobdata.Nodes{Targets: targets("a")},
			want:  []nodereport.Node{{Name: "a", Failed: true, Reason: "PodFailed", Message: restored, Unavailable: noPodFailed}},
		},
		"no node list: the named failures only": {
			job: builder.MakeImageJob("j").Phase(eraserv1.PhaseFailed).Started(3).
				FailedNode("x", "PodMissing", "gone").FailedNode("y", "PodFailed", "exit 1").FailedNode("z", eraserv1.ReasonWaitTimedOut, "gave up").
				FailedIndexes("PodFailed", "0-40").Obj(),
			written: map[string]bool{"y": true},
			want: []nodereport.Node{
				{Name: "x", Failed: true, Reason: "PodMissing", Message: "gone", Unavailable: noPodFailed},
				{Name: "z", Reason: "NotStarted/WaitTimedOut", Message: gaveUp + "gave up"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Missing(tc.job, tc.nodes, tc.written, map[string]bool{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReportNamesEveryNode: a job of 100 nodes and 2
// skipped whose report could read only some pods: 20 finished, one still
// running when the job ended (its collector failed, the remover waited),
// 40 failed nodes without pods (more than status.failedNodes names: the
// rest are in failedIndexes), the others' pods deleted before the report
// read them. The complete report names all 102, each with its counts or
// the reason it has none.
func TestReportNamesEveryNode(t *testing.T) {
	ctx := setup(t)
	clk := clocktesting.NewFakeClock(time.Now())
	job := builder.MakeImageJob("every-node").Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range 100 {
		names = append(names, fmt.Sprintf("n-%03d", i))
	}
	list := jobdata.Nodes{Targets: targets(names...), Skipped: []nodefilter.Skipped{{Name: "cordoned", Reason: eraserv1.ReasonNotReady}, {Name: "gpu", Reason: eraserv1.ReasonTainted, Detail: "gpu=true:NoSchedule"}}}
	if err := jobdata.CreateNodes(ctx, env.Client, ns, job, list); err != nil {
		t.Fatal(err)
	}
	finishedPods(t, ctx, job, names[:20])
	src := logs{}
	for _, n := range names[:20] {
		src[podspec.PodName(job.Name, n)+"/remover"] = line("removed", "docker.io/library/nginx:1.25", "sha256:aa", "Unused", 100, "")
	}
	// n-020: the collector exited 1, the remover still waits for its list.
	running := jobPod(job, "n-020")
	running.Spec.Containers = append(running.Spec.Containers, corev1.Container{Name: podspec.CollectorContainer, Image: "collector"})
	if err := env.Client.Create(ctx, running); err != nil {
		t.Fatal(err)
	}
	running.Status.Phase = corev1.PodRunning
	running.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: podspec.CollectorContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}},
		{Name: podspec.RemoverContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}
	if err := env.Client.Status().Update(ctx, running); err != nil {
		t.Fatal(err)
	}
	src[podspec.PodName(job.Name, "n-020")+"/collector"] = line("in use", "docker.io/library/redis:7", "sha256:bb", "", 0, "container cache")
	// n-021..n-060 failed without pods: StartTimeout, 32 of them named.
	job.Status.Phase, job.Status.Desired, job.Status.Started = eraserv1.PhaseFailed, 100, 100
	job.Status.FailedIndexes = map[string]string{"StartTimeout": "21-60", "PodFailed": "20"}
	job.Status.FailedNodes = []eraserv1.NodeFailure{{Node: "n-020", Reason: "PodFailed", Message: "container collector: Error (exit code 1)"}}
	for _, n := range names[21:52] {
		job.Status.FailedNodes = append(job.Status.FailedNodes, eraserv1.NodeFailure{Node: n, Reason: "StartTimeout", Message: "did not start within 10m"})
	}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}

	got := collect(t, ctx, NewReconciler(env.Client, env.Client, src, clk, Options{Namespace: ns}), clk, job, 20)
	if job.Status.Report.Nodes != 102 || len(got) != 102 {
		t.Fatalf("the report has %d nodes (status says %d), want all 102 of the job", len(got), job.Status.Report.Nodes)
	}
	for name, n := range got {
		var ok bool
		switch i := slices.Index(names, name); {
		case i < 0:
			kind, _ := n.Kind()
			ok = kind == nodereport.KindSkipped && !n.Failed
		case i < 20:
			ok = len(n.Entries) == 1 && n.Counts["removed"] == 1 && !n.Failed
		case i == 20:
			ok = n.Failed && n.Reason == "PodFailed" && strings.Contains(n.Message, unfinishedPod) && len(n.Entries) == 1 && n.Entries[0].Outcome == "in use"
		case i <= 60:
			ok = n.Failed && n.Reason == "StartTimeout" && n.Unavailable == noPodFailed
		default:
			ok = !n.Failed && n.Unavailable == noPodSucceeded
		}
		if !ok {
			t.Errorf("node %s: %+v", name, n)
		}
	}
}

// ours filters the pass's list in place: the job's own pods, in order,
// never a leftover of an earlier run of the job's name.
func TestOursKeepsTheJobsPodsInOrder(t *testing.T) {
	pod := func(name string, owner types.UID) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Name: "job", UID: owner, Controller: ptr.To(true)}}
		}
		return p
	}
	cases := map[string]struct {
		pods []corev1.Pod
		want []string
	}{
		"none":            {},
		"all ours":        {pods: []corev1.Pod{pod("a", "run"), pod("b", "run")}, want: []string{"a", "b"}},
		"leftovers first": {pods: []corev1.Pod{pod("old", "earlier"), pod("a", "run"), pod("x", ""), pod("b", "run")}, want: []string{"a", "b"}},
		"leftovers last":  {pods: []corev1.Pod{pod("a", "run"), pod("old", "earlier")}, want: []string{"a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range ours(tc.pods, "run") {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pods kept (-want +got):\n%s", diff)
			}
		})
	}
}
