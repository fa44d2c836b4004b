package fault_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestLeaderKilledMidJob: two replicas with leader election; the leader is
// killed (SIGKILL: no lease hand-over) while a rolling job runs. The other
// replica takes the lease once it expires (15 s) and finishes the same job:
// one job, one pod per node, every node succeeded, the results counted once.
func TestLeaderKilledMidJob(t *testing.T) {
	s := newScenario(t, "fault-leader", nil)
	const nodes = 4
	names := s.addNodes(s.ns, nodes)
	doc := config("1m", "1", "1", "")
	leader := s.startManager(doc)
	key := client.ObjectKey{Namespace: s.ns, Name: manager.LeaderElectionID}
	var holder string
	testenv.WaitFor(t, 30*time.Second, "the first replica to lead", func() bool {
		lease := &coordinationv1.Lease{}
		if env.Client.Get(s.ctx, key, lease) != nil || lease.Spec.HolderIdentity == nil {
			return false
		}
		holder = *lease.Spec.HolderIdentity
		return holder != "" && len(leader.Lines("Successfully acquired lease")) > 0
	})
	t.Logf("leader: %s", holder)
	standby := s.startManager(doc)
	s.createList()

	// Mid-job: the first node done, the second's pod created.
	testenv.WaitFor(t, 30*time.Second, "the first node done and the second's pod", func() bool {
		s.kubelet(func(n string) bool { return n == names[0] })
		return len(s.pods()) == 2
	})
	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	testenv.WaitFor(t, 40*time.Second, "the standby to take the lease", func() bool {
		return len(standby.Lines("Successfully acquired lease")) > 0
	})
	t.Logf("the standby leads %v after the leader was killed", time.Since(killed).Round(100*time.Millisecond))
	job := s.waitJob(60*time.Second, "the job to finish", func() { s.kubelet(nil) }, finished)
	t.Logf("job %s %s %v after the leader was killed", job.Name, job.Status.Phase, time.Since(killed).Round(100*time.Millisecond))
	c := ready(job.Status.Conditions)
	t.Logf("ImageJob Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != nodes || job.Status.Failed != 0 {
		t.Errorf("job %s succeeded %d failed %d %+v; want Completed on %d nodes", job.Status.Phase,
			job.Status.Succeeded, job.Status.Failed, job.Status.FailedNodes, nodes)
	}
	if got := s.recreated(); len(got) > 0 {
		t.Errorf("pods created twice: %v", got)
	}
	if len(s.podUIDs) != nodes {
		t.Errorf("pods on %d nodes, want %d", len(s.podUIDs), nodes)
	}
	var all eraserv1.ImageJobList
	if err := env.Client.List(s.ctx, &all); err != nil || len(all.Items) != 1 {
		t.Errorf("%d ImageJobs (%v), want the one", len(all.Items), err)
	}
	want := s.writtenSum()
	if job.Status.Results == nil || job.Status.Results.Removed != want {
		t.Errorf("results %+v, want removed %d (the sum of the summaries)", job.Status.Results, want)
	}
	list := s.waitRecorded(30 * time.Second)
	if list.Status.Success != nodes || list.Status.Results == nil || list.Status.Results.Removed != want {
		t.Errorf("ImageList success %d results %+v, want %d and removed %d", list.Status.Success, list.Status.Results, nodes, want)
	}
	// The new leader did not start the job again: no second Started Event.
	countStarted := func(evs []corev1.Event) (n int) {
		for _, e := range evs {
			if e.Reason == "Started" {
				n += int(max(e.Count, 1))
			}
		}
		return n
	}
	// The killed leader's recorder may not have sent its Event yet when
	// the job ends; a second one would have come long before.
	evs := eventsUntil(t, "ImageJob", job.Name, time.Minute, func(evs []corev1.Event) bool { return countStarted(evs) > 0 })
	if started := countStarted(evs); started != 1 {
		t.Errorf("%d Started Events, want 1", started)
	}
	if l := standby.Lines("became leader"); len(l) > 0 {
		t.Logf("standby log: %.200s", l[0])
	}
	if strings.Contains(standby.Log.String(), `"reason":"JobCreated"`) {
		t.Errorf("the new leader created a job")
	}
}
