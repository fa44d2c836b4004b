package fault_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/cli/reportcmd"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// TestReportNamesNotStartedNodes: 8 nodes, waves of 2, maxFailedNodes 1,
// and another run's unfinished worker on node 001. The canary creates a
// pod on 000 only, 001 waiting behind the other run; 000 fails, within the
// budget, so 002 and 003 get pods; 002 fails too, over the budget, and the
// run ends Failed once 003 succeeded, with 001 still waiting and 004-007
// never reached. Its report, read as `kubectl eraser report` reads it,
// names each of the five nodes that never had a worker pod NotStarted with
// its cause (Waiting, FailureBudgetExceeded), none of them succeeded.
func TestReportNamesNotStartedNodes(t *testing.T) {
	s := newScenario(t, "fault-notstarted", nil)
	nodes := s.addNodes(s.ns, 8)
	const other = "other-run"
	holder := builder.MakePod("other-run-worker", nodes[1], time.Now()).Job(other).Obj()
	holder.Namespace = s.ns
	holder.Spec.Containers = []corev1.Container{{Name: "remover", Image: "remover"}}
	if err := env.Client.Create(s.ctx, holder); err != nil {
		t.Fatal(err)
	}
	s.startManager(budgetConfig)
	s.createList()

	// s.pods counts the holder's node among the nodes with a worker pod.
	s.waitWave(2)
	canary := s.podOn(nodes[0])
	if canary == nil || s.podNodes() != 2 {
		t.Fatalf("the canary's pods are not on %s alone (%s waits behind %s): %s", nodes[0], nodes[1], other, describePods(s.pods()))
	}
	job := s.waitJob(2*time.Minute, "the job to say "+nodes[1]+" waits behind "+other, nil, func(j *eraserv1.ImageJob) bool {
		return j.Status.Waiting == 1 && j.Status.QueuedBehind == other
	})
	t.Logf("canary: %s; waiting %d (%s), behind %s", canary.Spec.NodeName, job.Status.Waiting, job.Status.WaitingIndexes, job.Status.QueuedBehind)
	s.failWorker(canary, 1)

	s.waitWave(4)
	second, last := s.podOn(nodes[2]), s.podOn(nodes[3])
	if second == nil || last == nil {
		t.Fatalf("the second wave is not on %s and %s: %s", nodes[2], nodes[3], describePods(s.pods()))
	}
	s.failWorker(second, 1)
	s.kubeletPods(func(p *corev1.Pod) bool { return p.Name == last.Name })
	job = s.waitJob(3*time.Minute, "the job to stop", func() {
		s.kubeletPods(func(p *corev1.Pod) bool { return p.Name == last.Name })
	}, finished)
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob %s Ready: %s/%s: %s", job.Status.Phase, c.Status, c.Reason, c.Message)
	t.Logf("started %d, waiting %d (%s), succeeded %d, failed %d, skipped %d", job.Status.Started, job.Status.Waiting,
		job.Status.WaitingIndexes, job.Status.Succeeded, job.Status.Failed, job.Status.Skipped)
	if job.Status.Phase != eraserv1.PhaseFailed || c.Reason != eraserv1.ReasonFailureBudgetExceeded || job.Status.Started != 4 ||
		job.Status.Succeeded != 1 || job.Status.Failed != 2 || job.Status.Skipped != 5 {
		t.Fatalf("the run did not end as its failure budget stops it, with 4 nodes started, 1 succeeded, 2 failed, 5 untouched")
	}
	if !strings.Contains(c.Message, "5 nodes not started") {
		t.Errorf("Ready message %q does not count the 5 nodes not started (the waiting one included)", c.Message)
	}
	if got := jobdata.ParseIndexes(job.Status.WaitingIndexes, job.Status.Started); !cmp.Equal(got, []int{1}) {
		t.Errorf("waitingIndexes %q at the end, want node 1 (%s) still waiting", job.Status.WaitingIndexes, nodes[1])
	}

	testenv.WaitFor(t, 5*time.Minute, "the job's report complete", func() bool {
		job = s.waitJob(time.Minute, "the job", nil, finished)
		return job.Status.Report != nil && job.Status.Report.Complete
	})
	out, err := reportcmd.Load(s.ctx, env.Client, "imagejob/"+job.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	reportcmd.Print(&text, out)
	t.Logf("kubectl eraser report imagejob/%s:\n%s", job.Name, text.String())

	// Every node with no worker pod is NotStarted, with its cause; the
	// others ran.
	notStarted := map[string]string{}
	for _, n := range out.Nodes {
		if kind, _ := n.Kind(); kind == nodereport.KindNotStarted {
			notStarted[n.Name] = n.Reason
		}
		if n.Name == nodes[1] && !strings.Contains(n.Message, "waited for its worker pod") {
			t.Errorf("%s: %q does not say it waited for its worker pod", n.Name, n.Message)
		}
		if strings.HasPrefix(n.Reason, nodereport.KindNotStarted) && !strings.Contains(n.Message, "failure budget") {
			t.Errorf("%s: %q does not say the failure budget stopped the run", n.Name, n.Message)
		}
	}
	want := map[string]string{nodes[1]: "NotStarted/Waiting"}
	for _, n := range nodes[4:] {
		want[n] = "NotStarted/FailureBudgetExceeded"
	}
	if diff := cmp.Diff(want, notStarted); diff != "" {
		t.Errorf("nodes reported not started (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reportcmd.Summary{Succeeded: 1, Failed: 2, NotStarted: 5}, out.Summary); diff != "" {
		t.Errorf("report summary (-want +got):\n%s", diff)
	}
	if !out.Complete || len(out.Nodes) != len(nodes) {
		t.Errorf("report complete %v with %d nodes, want all %d", out.Complete, len(out.Nodes), len(nodes))
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if node, _, _ := strings.Cut(line, " "); want[node] != "" && strings.Contains(line, "succeeded") {
			t.Errorf("a node that never had a worker pod printed as succeeded: %q", line)
		}
	}
	if !strings.Contains(text.String(), "5 not started") || strings.Count(text.String(), "(not started)") != 5 {
		t.Errorf("the printed report does not show the 5 nodes not started")
	}
}
