package fault_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// The every-node-covered scenarios: a node that misses a
// scheduled run gets a catch-up run of its own once it is eligible again.

// The schedule state's per-node keys (docs/runs.md, Every node covered).
const (
	stateCleaned = "cleaned"
	stateLastRun = "lastRun"
	stateTried   = "catchUpTried"
)

// catchUpBatch is how long the first node due for a catch-up waits for
// others before its run starts (manager.scheduling.catchUpBatch): shorter
// than the default minute, and still many times a reconcile's reaction, so
// that a catch-up started without waiting for it shows.
const catchUpBatch = 15 * time.Second

// catchUpConfig runs a scheduled run at start-up and no other for a day;
// finished jobs are kept an hour, so that the test can read them. The
// minimum image age is a second: a node is not caught up before it is that
// old, and the test's nodes are minutes old.
const catchUpConfig = "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n" +
	"manager: {scheduling: {repeatInterval: 24h, beginImmediately: true, catchUpBatch: 15s}, imageJob: {cleanup: {delayOnSuccess: 1h, delayOnFailure: 1h}}, retention: {minAge: 1s}}\n" +
	"components: {collector: {enabled: true}, scanner: {enabled: false}}\n"

// TestCatchUpAfterNotReady: of 6 nodes, one is NotReady while the
// scheduled run goes; the run completes on the 5 others and starts nothing
// for the NotReady node while it stays so. Once it is Ready again, and a
// catch-up batch later, one catch-up run starts on that node alone
// (its job data, node list and only pod); it completes, the state records
// the node cleaned, the schedule's rhythm (lastEnd, lastRun) stays the
// scheduled run's, and no other run starts, even when the node's readiness
// changes again.
func TestCatchUpAfterNotReady(t *testing.T) {
	s := newScenario(t, "fault-catchup", nil)
	const nodes = 6
	s.resetScheduleState()
	names := s.addNodes(s.ns, nodes)
	late := names[3]
	for _, n := range names {
		s.setNodeReady(n, n != late)
	}
	s.startManager(catchUpConfig)

	var sched eraserv1.ImageJob
	testenv.WaitFor(t, 2*time.Minute, "the scheduled run's pods on the 5 Ready nodes", func() bool {
		jobs := s.scheduledJobs()
		if len(jobs) != 1 {
			return false
		}
		sched = jobs[0]
		// While it runs, its condition counts the skipped node by reason.
		return len(s.podsOf(sched.UID)) == nodes-1 && strings.Contains(ready(sched.Status.Conditions).Message, "skipped: 1 NotReady")
	})
	t.Logf("scheduled run %s running: %s", sched.Name, ready(sched.Status.Conditions).Message)
	if catchUpOf(&sched) {
		t.Fatalf("the first scheduled job %s is a catch-up", sched.Name)
	}
	for _, p := range s.podsOf(sched.UID) {
		if p.Spec.NodeName == late {
			t.Errorf("the scheduled run has pod %s on NotReady node %s", p.Name, late)
		}
	}
	done := s.waitScheduled(sched.Name, 2*time.Minute)
	t.Logf("scheduled run %s: %s, desired %d, succeeded %d, skipped %d: %s", done.Name, done.Status.Phase,
		done.Status.Desired, done.Status.Succeeded, done.Status.Skipped, ready(done.Status.Conditions).Message)
	if done.Status.Phase != eraserv1.PhaseCompleted || done.Status.Succeeded != nodes-1 || done.Status.Skipped != 1 {
		t.Errorf("scheduled run %s, %d succeeded, %d skipped; want Completed on %d, %d skipped (NotReady)",
			done.Status.Phase, done.Status.Succeeded, done.Status.Skipped, nodes-1, 1)
	}
	if nl, err := jobdata.GetNodes(s.ctx, env.Client, s.ns, &done); err != nil {
		t.Errorf("the scheduled run's node list: %v", err)
	} else if len(nl.Skipped) != 1 || nl.Skipped[0].Name != late || nl.Skipped[0].Reason != "NotReady" || len(nl.Targets) != nodes-1 {
		t.Errorf("the scheduled run's node list: targets %v, skipped %+v; want %d targets, %s skipped NotReady",
			nl.Targets, nl.Skipped, nodes-1, late)
	}
	before := s.waitStateCleaned(names[0], 2*time.Minute)
	if c := nodeTimes(t, before[stateCleaned]); c[late] != 0 {
		t.Errorf("state %v records NotReady node %s cleaned", before, late)
	}

	// NotReady: not eligible, so nothing is due, batch or not.
	s.noCatchUp(catchUpBatch+20*time.Second, "while "+late+" is NotReady", 0, nil)

	s.setNodeReady(late, true)
	readyAt := time.Now()
	var cu eraserv1.ImageJob
	testenv.WaitFor(t, 5*time.Minute, "a catch-up run after "+late+" became Ready", func() bool {
		c := s.catchUpJobs()
		if len(c) > 1 {
			t.Fatalf("%d catch-up runs for one node: %v", len(c), jobNames(c))
		}
		if len(c) == 1 {
			cu = c[0]
		}
		return len(c) == 1
	})
	seen := time.Since(readyAt)
	t.Logf("catch-up run %s seen %v after %s became Ready", cu.Name, seen.Round(100*time.Millisecond), late)
	if seen < catchUpBatch-time.Second {
		t.Errorf("the catch-up started %v after the node became Ready, before the batch's %v", seen, catchUpBatch)
	}
	if !strings.HasPrefix(cu.Name, "imagejob-scheduled-catchup-") || cu.Labels[eraserv1.LabelJobOwner] != eraserv1.JobOwnerCollector {
		t.Errorf("catch-up job %s labels %v: want imagejob-scheduled-catchup-<unix>, a scheduled job", cu.Name, cu.Labels)
	}
	// The manager creates a job before its data (jobdata.CreateJob), so the
	// job can be seen a moment before the data exists.
	var d *jobdata.Data
	var derr error
	testenv.WaitFor(t, 2*time.Minute, "the catch-up's data", func() bool {
		d, derr = jobdata.Get(s.ctx, env.Client, s.ns, &cu)
		return !apierrors.IsNotFound(derr)
	})
	if derr != nil {
		t.Errorf("the catch-up's data: %v", derr)
	} else if !slices.Equal(d.Nodes, []string{late}) {
		t.Errorf("the catch-up's data confines it to %v, want [%s]", d.Nodes, late)
	}

	var pods []corev1.Pod
	testenv.WaitFor(t, 2*time.Minute, "the catch-up's pod", func() bool {
		pods = s.podsOf(cu.UID)
		return len(pods) > 0
	})
	cuDone := s.waitScheduled(cu.Name, 2*time.Minute)
	if pods = s.podsOf(cu.UID); len(pods) != 1 || pods[0].Spec.NodeName != late {
		t.Errorf("catch-up pods %v, want one on %s", describePods(pods), late)
	}
	if nl, err := jobdata.GetNodes(s.ctx, env.Client, s.ns, &cuDone); err != nil {
		t.Errorf("the catch-up's node list: %v", err)
	} else if len(nl.Targets) != 1 || nl.Targets[0].Name != late {
		t.Errorf("the catch-up's node list %+v, want %s alone", nl.Targets, late)
	}
	t.Logf("catch-up %s: %s, desired %d, succeeded %d: %s", cuDone.Name, cuDone.Status.Phase, cuDone.Status.Desired,
		cuDone.Status.Succeeded, ready(cuDone.Status.Conditions).Message)
	if cuDone.Status.Phase != eraserv1.PhaseCompleted || cuDone.Status.Desired != 1 || cuDone.Status.Succeeded != 1 {
		t.Errorf("catch-up %s, desired %d, succeeded %d; want Completed on its one node",
			cuDone.Status.Phase, cuDone.Status.Desired, cuDone.Status.Succeeded)
	}
	scheduled := func(evs []corev1.Event) bool {
		return findEvent(evs, "Scheduled", "catch-up run started for 1 node(s)", late) != nil
	}
	if evs := eventsUntil(t, "ImageJob", cu.Name, time.Minute, scheduled); !scheduled(evs) {
		t.Errorf("no Scheduled Event naming the catch-up's node:%s", describeEvents(evs))
	}

	after := s.waitStateCleaned(late, 2*time.Minute)
	t.Logf("schedule state after the catch-up: %v", after)
	cleaned, tried := nodeTimes(t, after[stateCleaned]), nodeTimes(t, after[stateTried])
	for _, n := range names {
		if cleaned[n] == 0 {
			t.Errorf("state: node %s not cleaned: %s", n, after[stateCleaned])
		}
	}
	// A success clears the node's retry record.
	if len(tried) != 0 {
		t.Errorf("state: catchUpTried %s, want none: %s's catch-up succeeded", after[stateTried], late)
	}
	lastRun, err := time.Parse(time.RFC3339, after[stateLastRun])
	if err != nil || cleaned[late] < lastRun.Unix() {
		t.Errorf("state: %s cleaned at %d, before lastRun %s (%v)", late, cleaned[late], after[stateLastRun], err)
	}
	for _, k := range []string{keyLastEnd, stateLastRun, keyLastStart} {
		if after[k] != before[k] {
			t.Errorf("state %s moved from %q to %q: a catch-up moved the rhythm", k, before[k], after[k])
		}
	}

	// Caught up: another change of its readiness wakes the schedule, and
	// nothing is due.
	s.noCatchUp(catchUpBatch+20*time.Second, "after the catch-up", 1, func() {
		s.setNodeReady(late, false)
		s.setNodeReady(late, true)
	})
	if jobs := s.scheduledJobs(); len(jobs) != 2 {
		t.Errorf("scheduled jobs %v, want the scheduled run and its catch-up", jobNames(jobs))
	}
}

// waitScheduled plays the kubelet for the named scheduled job's pods until
// it finishes, and returns it.
func (s *scenario) waitScheduled(name string, timeout time.Duration) eraserv1.ImageJob {
	s.t.Helper()
	return s.waitScheduledWith(name, timeout, s.kubeletFor)
}

// waitScheduledWith is waitScheduled with kubelet playing the kubelet for
// the job's pods, each round.
func (s *scenario) waitScheduledWith(name string, timeout time.Duration, kubelet func(job types.UID)) eraserv1.ImageJob {
	s.t.Helper()
	var job eraserv1.ImageJob
	testenv.WaitFor(s.t, timeout, "scheduled job "+name+" to finish", func() bool {
		if env.Client.Get(s.ctx, client.ObjectKey{Name: name}, &job) != nil {
			return false
		}
		kubelet(job.UID)
		return finished(&job)
	})
	return job
}

// noCatchUp fails the test if more than had catch-up runs are there
// within d; poke, when not nil, is called first.
func (s *scenario) noCatchUp(d time.Duration, what string, had int, poke func()) {
	s.t.Helper()
	if poke != nil {
		poke()
	}
	from := time.Now()
	for time.Since(from) < d {
		if c := s.catchUpJobs(); len(c) > had {
			s.t.Fatalf("catch-up runs %v %s (%v into a %v watch)", jobNames(c), what, time.Since(from).Round(time.Second), d)
		}
		time.Sleep(time.Second)
	}
}

// catchUpJobs are the catch-up runs there are.
func (s *scenario) catchUpJobs() []eraserv1.ImageJob {
	var out []eraserv1.ImageJob
	for _, j := range s.scheduledJobs() {
		if catchUpOf(&j) {
			out = append(out, j)
		}
	}
	return out
}

func catchUpOf(j *eraserv1.ImageJob) bool { return j.Annotations[eraserv1.AnnotationCatchUp] == "true" }

// waitStateCleaned waits until the schedule's state records node cleaned,
// and returns the state's data.
func (s *scenario) waitStateCleaned(node string, timeout time.Duration) map[string]string {
	s.t.Helper()
	var data map[string]string
	testenv.WaitFor(s.t, timeout, "the schedule's state to record "+node+" cleaned", func() bool {
		cm := &corev1.ConfigMap{}
		if env.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: scheduleState}, cm) != nil {
			return false
		}
		data = cm.Data
		var cleaned map[string]int64
		return json.Unmarshal([]byte(data[stateCleaned]), &cleaned) == nil && cleaned[node] != 0
	})
	return data
}

// resetScheduleState deletes a state left by an earlier run of the test
// (-count), which would put the next scheduled run a day away.
func (s *scenario) resetScheduleState() {
	s.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: scheduleState}}
	if err := env.Client.Delete(s.ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
}

// setNodeReady writes the node's Ready condition, as its kubelet does.
func (s *scenario) setNodeReady(name string, isReady bool) {
	s.t.Helper()
	status := corev1.ConditionFalse
	if isReady {
		status = corev1.ConditionTrue
	}
	testenv.WaitFor(s.t, 30*time.Second, fmt.Sprintf("node %s Ready=%s", name, status), func() bool {
		n := &corev1.Node{}
		if env.Client.Get(s.ctx, client.ObjectKey{Name: name}, n) != nil {
			return false
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status,
			LastHeartbeatTime: now, LastTransitionTime: now, Reason: "FaultTier"}}
		return env.Client.Status().Update(s.ctx, n) == nil
	})
}

// nodeTimes decodes a per-node key of the state: node names to unix seconds.
func nodeTimes(t *testing.T, v string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	if v == "" {
		return out
	}
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		t.Errorf("state value %q: %v", v, err)
	}
	return out
}

func jobNames(jobs []eraserv1.ImageJob) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Name
	}
	return out
}

func describePods(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name + "@" + p.Spec.NodeName
	}
	return out
}
