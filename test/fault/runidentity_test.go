package fault_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/podpaths"
)

// The run-identity scenarios: every run has an identity of its
// own, so that a list re-created under the same name, a deleted job or a
// deleted scheduled job never makes a run adopt another run's objects or
// start again by itself. They need the real garbage collector: it is what
// deletes a deleted owner's job, data and pods in a cluster.

// reasonRunDeleted is the ImageList's Event and Ready reason when its
// running job was deleted (api/v1's ReasonRunDeleted).
const reasonRunDeleted = "RunDeleted"

// quietFor is how long a stopped run must stay stopped: a run started again
// by the manager's reaction to the deletion comes within a second or two.
const quietFor = 20 * time.Second

// TestReplaceDuringARun: while an ImageList's run is going, the list is
// deleted and created again at once with the same name and other images,
// as `kubectl replace --force` and GitOps tools with Replace=true do. The
// new list's run gets only its own images, completes when its pods do and
// counts none of the first run's pods.
func TestReplaceDuringARun(t *testing.T) {
	env.RequireGarbageCollector(t)
	s := newScenario(t, "fault-replace", nil)
	const nodes = 4
	const oldImage, newImage = "docker.io/library/alpine:3.7.3", "docker.io/library/busybox:1.36.1"
	s.addNodes(s.ns, nodes)
	s.startManager(config("10m", "1", "0", ""))
	s.keepGCLog()
	old := builder.MakeImageList(s.list).Images(oldImage).Obj()
	if err := env.Client.Create(s.ctx, old); err != nil {
		t.Fatal(err)
	}
	first := s.waitRunning(old.UID, nodes)

	// kubectl replace --force: delete, wait until gone, create.
	if err := env.Client.Delete(s.ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, gcWait, "the first list to be gone", func() bool {
		return apierrors.IsNotFound(env.Client.Get(s.ctx, client.ObjectKey{Name: s.list}, &eraserv1.ImageList{}))
	})
	replaced := builder.MakeImageList(s.list).Images(newImage).Obj()
	if err := env.Client.Create(s.ctx, replaced); err != nil {
		t.Fatal(err)
	}
	t.Logf("list %s replaced (uid %s → %s) while job %s (uid %s) ran", s.list, old.UID, replaced.UID, first.Name, first.UID)

	var job *eraserv1.ImageJob
	testenv.WaitFor(t, 3*time.Minute, "the new list's job to finish", func() bool {
		s.reap()
		jobs := s.jobsOf(replaced.UID)
		if len(jobs) > 1 {
			t.Fatalf("%d jobs for one generation of the new list", len(jobs))
		}
		if len(jobs) == 0 {
			return false
		}
		job = &jobs[0]
		s.kubeletFor(job.UID)
		return finished(job)
	})
	t.Logf("new job %s (uid %s): %s, desired %d, succeeded %d, failed %d %+v", job.Name, job.UID, job.Status.Phase,
		job.Status.Desired, job.Status.Succeeded, job.Status.Failed, job.Status.FailedNodes)
	if job.UID == first.UID {
		t.Errorf("the new list's run is the first list's job %s", first.Name)
	}
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Desired != nodes || job.Status.Succeeded != nodes || job.Status.Failed != 0 {
		t.Errorf("new job %s: %s, desired %d, succeeded %d, failed %d; want Completed on %d of %d nodes",
			job.Name, job.Status.Phase, job.Status.Desired, job.Status.Succeeded, job.Status.Failed, nodes, nodes)
	}
	for _, f := range job.Status.FailedNodes {
		t.Errorf("new job failed node %s: %s: %s (a pod of the first run counted?)", f.Node, f.Reason, f.Message)
	}
	// The data as the pods mount it: the job's ConfigMap, owned by it.
	data := &corev1.ConfigMap{}
	var images []string
	if err := env.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: job.Name}, data); err != nil {
		t.Errorf("the new job's data: %v", err)
	} else if ref := metav1.GetControllerOf(data); ref == nil || ref.UID != job.UID {
		t.Errorf("the new job's data ConfigMap is owned by %+v, not the new job %s", ref, job.UID)
	} else if err := json.Unmarshal([]byte(data.Data[podpaths.ImageListKey]), &images); err != nil || !slices.Equal(images, []string{newImage}) {
		t.Errorf("the new job runs images %v (%v), want only the new list's [%s]", images, err, newImage)
	}
	l := s.waitRecorded(time.Minute)
	if l.UID != replaced.UID || l.Status.Success != nodes || l.Status.Failed != 0 {
		t.Errorf("new list status: success %d, failed %d (uid %s); want %d and 0", l.Status.Success, l.Status.Failed, l.UID, nodes)
	}
}

// TestDeletedJobStaysStopped: deleting an ImageList's running job (kubectl
// delete imagejob) stops that run: its pods go, no job starts again for the
// same spec, and the list says why with a RunDeleted Warning and Ready.
func TestDeletedJobStaysStopped(t *testing.T) {
	env.RequireGarbageCollector(t)
	s := newScenario(t, "fault-deljob", nil)
	const nodes = 3
	s.addNodes(s.ns, nodes)
	s.startManager(config("10m", "1", "0", ""))
	s.keepGCLog()
	s.createList()
	list := s.getList()
	job := s.waitRunning(list.UID, nodes)

	s.deleteAndSettle(job)
	s.stayStopped(fmt.Sprintf("ImageList %s's deleted run", s.list), func() []eraserv1.ImageJob { return s.jobsOf(list.UID) })

	testenv.WaitFor(t, time.Minute, "the list to say its run was deleted", func() bool {
		l := s.getList()
		e := findEvent(events(t, "ImageList", s.list), reasonRunDeleted)
		return e != nil && e.Type == "Warning" && ready(l.Status.Conditions).Reason == reasonRunDeleted
	})
	c := ready(s.getList().Status.Conditions)
	t.Logf("ImageList Ready: %s/%s: %s", c.Status, c.Reason, c.Message)
}

// waitRunning waits for the one job of the list of that UID to have a
// pending pod on every node, and returns it.
func (s *scenario) waitRunning(list types.UID, nodes int) *eraserv1.ImageJob {
	s.t.Helper()
	var job *eraserv1.ImageJob
	testenv.WaitFor(s.t, 2*time.Minute, "the run's pods on every node", func() bool {
		jobs := s.jobsOf(list)
		if len(jobs) != 1 {
			return false
		}
		job = &jobs[0]
		return len(s.podsOf(job.UID)) == nodes
	})
	return job
}

// jobsOf are the ImageJobs whose controller is the object of that UID,
// whatever their names and labels.
func (s *scenario) jobsOf(owner types.UID) []eraserv1.ImageJob {
	var all eraserv1.ImageJobList
	if err := env.Client.List(s.ctx, &all); err != nil {
		return nil
	}
	var out []eraserv1.ImageJob
	for _, j := range all.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == owner {
			out = append(out, j)
		}
	}
	return out
}

// stayStopped fails the test if jobs lists any job, or the scenario any
// worker pod, within quietFor.
func (s *scenario) stayStopped(what string, jobs func() []eraserv1.ImageJob) {
	s.t.Helper()
	from := time.Now()
	for time.Since(from) < quietFor {
		s.reap()
		if js := jobs(); len(js) > 0 {
			s.t.Fatalf("%s started again: job %s (uid %s) there %v after the deletion settled",
				what, js[0].Name, js[0].UID, time.Since(from).Round(100*time.Millisecond))
		}
		if pods := s.pods(); len(pods) > 0 {
			s.t.Fatalf("%s: worker pod %s there %v after the deletion settled", what, pods[0].Name, time.Since(from).Round(100*time.Millisecond))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
