package fault_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// scheduleState is the schedule's state ConfigMap (the schedule
// controller's StateName) and its keys, as a user reads them.
const (
	scheduleState = "eraser-schedule-state"
	keyLastStart  = "lastStart"
	keyLastEnd    = "lastEnd"
)

// TestDeletedScheduledJobEndsItsSlot: a running scheduled job is deleted
// (kubectl delete imagejob). That ends its slot: no scheduled job starts
// again at once, and the next run is due one repeatInterval after the
// deleted run's start. The state says a run ended 61 minutes before, as
// on a manager whose schedule has run before: measured from that end, the
// deleted run's slot would be due again at once.
func TestDeletedScheduledJobEndsItsSlot(t *testing.T) {
	env.RequireGarbageCollector(t)
	s := newScenario(t, "fault-delsched", nil)
	const nodes = 3
	const interval = time.Hour
	s.addNodes(s.ns, nodes)
	now := time.Now().UTC()
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: scheduleState}, Data: map[string]string{
		keyLastStart: now.Add(-2 * time.Hour).Format(time.RFC3339),
		keyLastEnd:   now.Add(-interval - time.Minute).Format(time.RFC3339),
	}}
	if err := env.Client.Create(s.ctx, state); err != nil {
		t.Fatal(err)
	}
	s.startManager("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
		"manager: {scheduling: {repeatInterval: 1h, beginImmediately: true}, imageJob: {cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}}\n" +
		"components: {collector: {enabled: true}, scanner: {enabled: false}}\n")
	s.keepGCLog()

	var job *eraserv1.ImageJob
	testenv.WaitFor(t, 2*time.Minute, "the scheduled run's pods on every node", func() bool {
		jobs := s.scheduledJobs()
		if len(jobs) != 1 {
			return false
		}
		job = &jobs[0]
		return len(s.podsOf(job.UID)) == nodes
	})
	started := job.CreationTimestamp.Time
	s.deleteAndSettle(job)
	s.stayStopped("the deleted scheduled run", s.scheduledJobs)

	if err := env.Client.Get(s.ctx, client.ObjectKeyFromObject(state), state); err != nil {
		t.Fatal(err)
	}
	next, err := nextScheduledRun(state.Data, interval)
	if err != nil {
		t.Fatal(err)
	}
	want := started.Add(interval)
	t.Logf("deleted job %s started %s; state %v: next run %s (%+v from the deleted run's start + %v)",
		job.Name, started.UTC().Format(time.RFC3339), state.Data, next.UTC().Format(time.RFC3339), next.Sub(want), interval)
	if d := next.Sub(want); d < -time.Minute || d > time.Minute {
		t.Errorf("next scheduled run at %s, want about %s (one repeatInterval after the deleted run's start)",
			next.UTC().Format(time.RFC3339), want.UTC().Format(time.RFC3339))
	}
}

// nextScheduledRun is when the state ConfigMap says the next run is due
// with repeatInterval and no cron: docs/runs.md's rule, from the last
// start when it is later than the last recorded end (the run was
// deleted), else from the last end.
func nextScheduledRun(data map[string]string, interval time.Duration) (time.Time, error) {
	start, err := time.Parse(time.RFC3339, data[keyLastStart])
	if err != nil {
		return time.Time{}, err
	}
	end, _ := time.Parse(time.RFC3339, data[keyLastEnd])
	if start.After(end) {
		return start.Add(interval), nil
	}
	return end.Add(interval), nil
}

// scheduledJobs are the scheduled ImageJobs there are.
func (s *scenario) scheduledJobs() []eraserv1.ImageJob {
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(s.ctx, &jobs, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector}); err != nil {
		return nil
	}
	return jobs.Items
}

// TestOrphanedJobIsCleanedUp: `kubectl delete imagelist --cascade=orphan`
// while its run is going leaves the job running without its list. It
// finishes, and is cleaned up with its pods and data after delayOnSuccess
// although no list will ever record it.
func TestOrphanedJobIsCleanedUp(t *testing.T) {
	env.RequireGarbageCollector(t)
	s := newScenario(t, "fault-orphan", nil)
	const nodes = 3
	const delay = 5 * time.Second
	s.addNodes(s.ns, nodes)
	s.startManager("apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
		"manager: {imageJob: {cleanup: {delayOnSuccess: 5s, delayOnFailure: 5s, keepReportFor: 0s}}}\n")
	s.keepGCLog()
	s.createList()
	list := s.getList()
	job := s.waitRunning(list.UID, nodes)

	if err := env.Client.Delete(s.ctx, list, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	// The collector removes the owner reference, then the list's orphan
	// finalizer: only then is the list gone.
	testenv.WaitFor(t, gcWait, "the list to be gone and its job orphaned", func() bool {
		if !apierrors.IsNotFound(env.Client.Get(s.ctx, client.ObjectKey{Name: s.list}, &eraserv1.ImageList{})) {
			return false
		}
		j := &eraserv1.ImageJob{}
		if err := env.Client.Get(s.ctx, client.ObjectKey{Name: job.Name}, j); err != nil {
			t.Fatalf("the orphaned job: %v", err)
		}
		return metav1.GetControllerOf(j) == nil
	})

	var done time.Time
	testenv.WaitFor(t, 2*time.Minute, "the orphaned job to complete", func() bool {
		s.kubeletFor(job.UID)
		j := &eraserv1.ImageJob{}
		if env.Client.Get(s.ctx, client.ObjectKey{Name: job.Name}, j) != nil || !finished(j) {
			return false
		}
		if j.Status.Phase != eraserv1.PhaseCompleted || j.Status.Succeeded != nodes {
			t.Fatalf("orphaned job %s: %s, %d of %d succeeded", j.Name, j.Status.Phase, j.Status.Succeeded, nodes)
		}
		done = time.Now()
		return true
	})
	dataKey := client.ObjectKey{Namespace: s.ns, Name: job.Name}
	testenv.WaitFor(t, delay+3*time.Minute, "the orphaned job, its pods and data to be cleaned up", func() bool {
		s.reap()
		j := &eraserv1.ImageJob{}
		err := env.Client.Get(s.ctx, client.ObjectKey{Name: job.Name}, j)
		gone := apierrors.IsNotFound(err) || (err == nil && j.UID != job.UID)
		return gone && len(s.podsOf(job.UID)) == 0 && apierrors.IsNotFound(env.Client.Get(s.ctx, dataKey, &corev1.ConfigMap{}))
	})
	t.Logf("orphaned job %s cleaned up %v after it completed (delayOnSuccess %v)", job.Name, time.Since(done).Round(100*time.Millisecond), delay)
}
