package imagelist

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// TestRunNowJobName: a re-run's job is never the generation's, two requests
// get two jobs, one request read twice gets one, and any list name fits.
func TestRunNowJobName(t *testing.T) {
	at := func(name, rv string) *eraserv1.ImageList {
		l := builder.MakeImageList(name).Generation(4).Obj()
		l.ResourceVersion = rv
		return l
	}
	long := strings.Repeat("x", 253)
	names := map[string]string{
		"generation":         JobName(at("list", "10")),
		"request":            RunNowJobName(at("list", "10")),
		"request again":      RunNowJobName(at("list", "11")),
		"long list":          JobName(at(long, "10")),
		"long list, request": RunNowJobName(at(long, "10")),
	}
	seen := map[string]string{}
	for what, n := range names {
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share the job name %s", what, other, n)
		}
		seen[n] = what
		if len(n) > 63 || strings.HasSuffix(n, "-") {
			t.Errorf("%s: job name %q is not a valid label value", what, n)
		}
	}
	if diff := cmp.Diff(RunNowJobName(at("list", "10")), RunNowJobName(at("list", "10"))); diff != "" {
		t.Errorf("one request, two names:\n%s", diff)
	}
	if !strings.HasPrefix(names["request"], names["generation"]+"-r") {
		t.Errorf("request's job %s does not name the generation's %s", names["request"], names["generation"])
	}
}

// TestRunNow on the real API server: run-now of a finished ImageList runs
// its unchanged spec again and records the new results; set while that run
// goes, it is refused with a Warning Event and starts nothing. Either way
// it is consumed, and a stale read of a consumed request starts nothing.
func TestRunNow(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	r.recorder = env.Recorder(t)
	const name = "rerun"
	list := builder.MakeImageList(name).Images("alpine").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Name: name}
	reconcileList := func() error {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: key})
		return err
	}
	get := func() *eraserv1.ImageList {
		t.Helper()
		l := &eraserv1.ImageList{}
		if err := env.Client.Get(ctx, key, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	request := func() *eraserv1.ImageList {
		t.Helper()
		l := get()
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[eraserv1.AnnotationRunNow] = "true"
		if err := env.Client.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	if err := reconcileList(); err != nil {
		t.Fatal(err)
	}
	first := jobsOf(t, name)[0]
	finish(t, &first, eraserv1.PhaseCompleted)
	if err := reconcileList(); err != nil {
		t.Fatal(err)
	}

	// Run now: a second job for generation 1, announced, the request gone.
	asRequested := request()
	if err := reconcileList(); err != nil {
		t.Fatal(err)
	}
	jobs := jobsOf(t, name)
	if len(jobs) != 2 {
		t.Fatalf("%d jobs after run-now, want 2", len(jobs))
	}
	rerun := jobs[0]
	if rerun.Name == first.Name {
		rerun = jobs[1]
	}
	if rerun.Name != RunNowJobName(asRequested) || generationOf(&rerun) != 1 {
		t.Errorf("re-run job %s for generation %d, want %s for 1", rerun.Name, generationOf(&rerun), RunNowJobName(asRequested))
	}
	if l := get(); runnow.Requested(l) || l.Generation != 1 {
		t.Errorf("after run-now: annotations %v, generation %d", l.Annotations, l.Generation)
	}
	testenv.WaitFor(t, 10*time.Second, "a RunNow event on the ImageList", func() bool {
		return len(env.Events(t, metav1.NamespaceDefault, name, eraserv1.ReasonRunNow)) == 1
	})

	// A stale read of the consumed request: the job exists, the patch fails.
	if _, err := r.runNow(ctx, asRequested.DeepCopy(), []eraserv1.ImageJob{first}); !apierrors.IsConflict(err) {
		t.Errorf("run-now from a stale read: %v, want a conflict", err)
	}

	// Refused while the re-run goes: no third job, the request gone.
	rerun.Status.Phase = eraserv1.PhaseRunning
	if err := env.Client.Status().Update(ctx, &rerun); err != nil {
		t.Fatal(err)
	}
	request()
	if err := reconcileList(); err != nil {
		t.Fatal(err)
	}
	if n := len(jobsOf(t, name)); n != 2 {
		t.Errorf("%d jobs after a refused run-now, want 2", n)
	}
	if l := get(); runnow.Requested(l) {
		t.Errorf("refused request not consumed: %v", l.Annotations)
	}
	testenv.WaitFor(t, 10*time.Second, "a RunNowRefused Warning naming the running job", func() bool {
		for _, e := range env.Events(t, metav1.NamespaceDefault, name, eraserv1.ReasonRunNowRefused) {
			if e.Type == "Warning" && strings.Contains(e.Message, rerun.Name) {
				return true
			}
		}
		return false
	})

	// The re-run's results are recorded as a run's are.
	time.Sleep(time.Second) // a completion time later than the first run's, to the second
	finish(t, &rerun, eraserv1.PhaseCompleted)
	rerun.Status.Results = &eraserv1.ImageResults{Removed: 1}
	if err := env.Client.Status().Update(ctx, &rerun); err != nil {
		t.Fatal(err)
	}
	if err := reconcileList(); err != nil {
		t.Fatal(err)
	}
	if l := get(); l.Status.Results == nil || l.Status.Results.Removed != 1 || !l.Status.Timestamp.Equal(rerun.Status.CompletionTime) {
		t.Errorf("status after the re-run: %+v", l.Status)
	}
	for _, j := range jobsOf(t, name) {
		if j.Annotations[eraserv1.AnnotationRecorded] != "true" {
			t.Errorf("job %s not marked recorded", j.Name)
		}
	}
}
