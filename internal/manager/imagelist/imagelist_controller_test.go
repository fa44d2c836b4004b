package imagelist

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/util/kname"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

const ns = "imagelist-test"

func newReconciler(t *testing.T) *Reconciler {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// As an install does, before any list exists.
	if _, err := adoption.Since(context.Background(), env.Client, ns); err != nil {
		t.Fatal(err)
	}
	doc := []byte("apiVersion: eraser.sh/v1alpha3\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return NewReconciler(env.Client, record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), eraserconfig.NewStore(cfg, doc), ns, "")
}

func jobsOf(t *testing.T, list string) []eraserv1.ImageJob {
	t.Helper()
	var jobs eraserv1.ImageJobList
	if err := env.Client.List(context.Background(), &jobs, client.MatchingLabels{eraserv1.LabelImageList: list}); err != nil {
		t.Fatal(err)
	}
	return jobs.Items
}

func finish(t *testing.T, job *eraserv1.ImageJob, phase eraserv1.JobPhase) {
	t.Helper()
	now := metav1.Now()
	job.Status = eraserv1.ImageJobStatus{Phase: phase, Desired: 3, Succeeded: 2, Failed: 1, CompletionTime: &now,
		Results: &eraserv1.ImageResults{Removed: 7, BytesFreed: 700}}
	meta.SetStatusCondition(&job.Status.Conditions, metav1.Condition{Type: eraserv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Failed", Message: "2 of 3 nodes succeeded"})
	if err := env.Client.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// TestEditDuringRunAndDryRun: a dry-run ImageList gets a dry-run job; an edit
// made while it runs waits (Pending) and runs after, never lost; results are
// recorded before the job may go.
func TestEditDuringRunAndDryRun(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	list := builder.MakeImageList("edits").Images("alpine").DryRun(true).Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	reconcileList := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "edits"}}); err != nil {
			t.Fatal(err)
		}
	}
	reconcileList()
	jobs := jobsOf(t, "edits")
	if len(jobs) != 1 || jobs[0].Annotations[eraserv1.AnnotationDryRun] != "true" || jobs[0].Name != JobName(list) {
		t.Fatalf("jobs %+v", jobs)
	}
	data, err := jobdata.Get(ctx, env.Client, ns, &jobs[0])
	if err != nil || !data.DryRun || len(data.Images) != 1 {
		t.Fatalf("job data %+v %v", data, err)
	}
	reconcileList() // idempotent: still one job
	if n := len(jobsOf(t, "edits")); n != 1 {
		t.Fatalf("%d jobs after a second pass", n)
	}

	// Edit while the first job runs.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "edits"}, list); err != nil {
		t.Fatal(err)
	}
	list.Spec.Images = []string{"*"}
	list.Spec.DryRun = false
	if err := env.Client.Update(ctx, list); err != nil {
		t.Fatal(err)
	}
	jobs[0].Status.Phase = eraserv1.PhaseRunning
	if err := env.Client.Status().Update(ctx, &jobs[0]); err != nil {
		t.Fatal(err)
	}
	reconcileList()
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "edits"}, list); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady); c == nil || c.Reason != eraserv1.ReasonPending {
		t.Errorf("condition while an older run goes: %+v", c)
	}
	if n := len(jobsOf(t, "edits")); n != 1 {
		t.Fatalf("%d jobs: a second started while the first ran", n)
	}

	finish(t, &jobs[0], eraserv1.PhaseFailed)
	reconcileList()
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "edits"}, list); err != nil {
		t.Fatal(err)
	}
	if list.Status.ObservedGeneration != 1 || list.Status.Success != 2 || list.Status.Failed != 1 || list.Status.Results.Removed != 7 || list.Status.Timestamp == nil ||
		list.Status.Job != jobs[0].Name {
		t.Errorf("recorded status %+v", list.Status)
	}
	all := jobsOf(t, "edits")
	var recorded, second bool
	for _, j := range all {
		if j.Name == jobs[0].Name && j.Annotations[eraserv1.AnnotationRecorded] == "true" {
			recorded = true
		}
		if j.Annotations[eraserv1.AnnotationGeneration] == "2" && j.Annotations[eraserv1.AnnotationDryRun] == "" {
			second = true
		}
	}
	if !recorded || !second {
		t.Errorf("first job recorded %v, edit's job created %v: %+v", recorded, second, all)
	}
}

// TestConfigSnapshotAndLargeList: a job keeps the configuration it started
// with when the configuration changes; the next job takes the new one. A
// 10,000-entry list fits its ConfigMap.
func TestConfigSnapshotAndLargeList(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	images := make([]string, 10000)
	for i := range images {
		images[i] = fmt.Sprintf("registry.example.com/team/application-%05d:v1.2.3", i)
	}
	list := builder.MakeImageList("snapshot").Images(images...).Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "snapshot"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	first := jobsOf(t, "snapshot")[0]
	data, err := jobdata.Get(ctx, env.Client, ns, &first)
	if err != nil || len(data.Images) != 10000 {
		t.Fatalf("10,000-entry job data: %d entries, %v", len(data.Images), err)
	}

	doc := []byte("apiVersion: eraser.sh/v1alpha3\ncomponents: {remover: {image: {repo: example.com/new-remover, tag: v2}}}\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	r.store.Set(cfg, doc)
	if data, _ := jobdata.Get(ctx, env.Client, ns, &first); data.Config.Components.Remover.Image.Repo == "example.com/new-remover" {
		t.Error("the running job's configuration changed")
	}
	finish(t, &first, eraserv1.PhaseCompleted)
	if err := env.Client.Get(ctx, req.NamespacedName, list); err != nil {
		t.Fatal(err)
	}
	list.Spec.Images = []string{"*"}
	if err := env.Client.Update(ctx, list); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobsOf(t, "snapshot") {
		if j.Annotations[eraserv1.AnnotationGeneration] != "2" {
			continue
		}
		data, err := jobdata.Get(ctx, env.Client, ns, &j)
		if err != nil || data.Config.Components.Remover.Image.Ref() != "example.com/new-remover:v2" {
			t.Errorf("the next job's remover: %+v, %v", data, err)
		}
		return
	}
	t.Error("no job for the edit")
}

// TestLongName: an ImageList with the longest name the API server allows
// runs: the job's name, its ConfigMaps and its label values are valid.
func TestLongName(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	name := strings.Repeat("long-image-list.", 15) + strings.Repeat("x", 253-16*15)
	list := builder.MakeImageList(name).Images("alpine").Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	jobs := jobsOf(t, kname.LabelValue(name))
	if len(jobs) != 1 {
		t.Fatalf("%d jobs", len(jobs))
	}
	job := jobs[0]
	if len(job.Name) > kname.MaxLabelValue {
		t.Errorf("job name %q is longer than a label value may be", job.Name)
	}
	if _, err := jobdata.Get(ctx, env.Client, ns, &job); err != nil {
		t.Errorf("the job's data: %v", err)
	}
}

// TestTooLargeList: an ImageList the API server stores but whose entries
// cannot fit in the job's ConfigMap is refused at once, on the ImageList,
// with no job and no retry.
func TestTooLargeList(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	r := newReconciler(t)
	images := make([]string, 12000)
	for i := range images {
		images[i] = fmt.Sprintf("registry.example.com/a-rather-long-team-name/application-number-%05d:v1.2.3-build-2026", i)
	}
	list := builder.MakeImageList("too-large").Images(images...).Obj()
	if err := env.Client.Create(ctx, list); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "too-large"}}
	for range 2 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("Reconcile: %v (a refusal is recorded, not retried)", err)
		}
	}
	if n := len(jobsOf(t, "too-large")); n != 0 {
		t.Errorf("%d jobs for a list that cannot run", n)
	}
	if err := env.Client.Get(ctx, req.NamespacedName, list); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(list.Status.Conditions, eraserv1.ConditionReady)
	if c == nil || c.Reason != eraserv1.ReasonTooLarge || !strings.Contains(c.Message, "bytes") || list.Status.ObservedGeneration != list.Generation {
		t.Errorf("status %+v, want Ready=False %s naming the size", list.Status, eraserv1.ReasonTooLarge)
	}
}

// A list deleted and created again under the same name is another list: its
// runs never take the first one's job names.
func TestJobNameFoldsInTheUID(t *testing.T) {
	list := func(uid string) *eraserv1.ImageList {
		l := builder.MakeImageList("gitops").Generation(1).Obj()
		l.UID = types.UID(uid)
		return l
	}
	names := map[string]string{
		"first list":             JobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
		"re-created list":        JobName(list("0f0f0f0f-0000-4000-8000-000000000002")),
		"first list, run-now":    RunNowJobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
		"re-created, run-now":    RunNowJobName(list("0f0f0f0f-0000-4000-8000-000000000002")),
		"first list, read again": JobName(list("0f0f0f0f-0000-4000-8000-000000000001")),
	}
	if names["first list"] != names["first list, read again"] {
		t.Errorf("one list, two job names: %s, %s", names["first list"], names["first list, read again"])
	}
	delete(names, "first list, read again")
	seen := map[string]string{}
	for what, n := range names {
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share the job name %s", what, other, n)
		}
		seen[n] = what
	}
}
