package fault_test

import (
	"strings"
	"testing"
	"time"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestAPIServerRestartMidJob: the kube-apiserver is restarted (SIGTERM, as
// in a control-plane upgrade; 5 s between its exit and the new start) while
// a rolling job runs, etcd up, and comes back on the same address. The
// graceful stop itself takes seconds, and a manager that cannot renew its
// leader lease for 10 s (the renew deadline) exits with "leader election
// lost"; the test then restarts it, as the kubelet would (restartPolicy
// Always). Either way the job finishes with every node succeeded, no pod
// created twice and the results counted once.
func TestAPIServerRestartMidJob(t *testing.T) {
	s := newScenario(t, "fault-apiserver", nil)
	const nodes = 4
	names := s.addNodes(s.ns, nodes)
	doc := config("1m", "1", "1", "")
	mgr := s.startManager(doc)
	s.createList()

	// Mid-job: the first node done, the second's pod created.
	testenv.WaitFor(t, 30*time.Second, "the first node done and the second's pod", func() bool {
		s.kubelet(func(n string) bool { return n == names[0] })
		pods := s.pods()
		return len(pods) == 2
	})

	begin := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Since(begin)
	time.Sleep(5 * time.Second)
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server: stopped in %v, down %v in all", stopped.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))

	restarts := 0
	first := mgr
	supervise := func() {
		if mgr.Exited() {
			restarts++
			t.Logf("the manager exited (%v); restarting it, as the kubelet would. Its last line: %.300s",
				mgr.Cmd.ProcessState, mgr.Log.Tail(2))
			mgr = s.startManager(doc)
		}
	}
	job := s.waitJob(90*time.Second, "the job to finish", func() { supervise(); s.kubelet(nil) }, finished)
	t.Logf("job %s %s %v after the API server was stopped", job.Name, job.Status.Phase, time.Since(begin).Round(100*time.Millisecond))
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != nodes || job.Status.Failed != 0 {
		t.Errorf("job %s, succeeded %d, failed %d %+v; want Completed on %d nodes", job.Status.Phase,
			job.Status.Succeeded, job.Status.Failed, job.Status.FailedNodes, nodes)
	}
	if got := s.recreated(); len(got) > 0 {
		t.Errorf("pods created twice: %v", got)
	}
	if len(s.podUIDs) != nodes {
		t.Errorf("pods on %d nodes, want %d", len(s.podUIDs), nodes)
	}
	want := s.writtenSum()
	if job.Status.Results == nil || job.Status.Results.Removed != want {
		t.Errorf("results %+v, want removed %d (the sum of the summaries)", job.Status.Results, want)
	}
	list := s.waitRecorded(30 * time.Second)
	if list.Status.Success != nodes || list.Status.Results == nil || list.Status.Results.Removed != want {
		t.Errorf("ImageList status success %d results %+v, want %d and removed %d", list.Status.Success, list.Status.Results, nodes, want)
	}
	// What the outage looked like from the manager.
	t.Logf("manager restarts: %d; during the outage it logged %d \"Reconciler error\" lines and %d lease errors",
		restarts, len(first.Lines("Reconciler error")), len(first.Lines(`"logger":"leaderelection"`, `"level":"error"`)))
	if l := first.Lines("Reconciler error"); len(l) > 0 {
		t.Logf("manager log: %.330s", l[0])
	}
	if restarts > 0 {
		if l := first.Lines(`"msg":"manager exited"`); len(l) == 0 || !strings.Contains(l[0], "leader election lost") {
			t.Errorf("the manager exited without saying it lost the leader election: %v", l)
		} else {
			t.Logf("manager log: %.120s", l[0])
		}
		if restarts > 1 {
			t.Errorf("the manager exited %d times", restarts)
		}
	}
}
