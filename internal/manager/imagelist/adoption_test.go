package imagelist

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/runnow"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestAdoptionAfterUpstream on the real API server: two lists were there
// before the install (upstream's "imagelist" with upstream's results, and
// one upstream ignored by name) and one is created after it. Only the new
// one runs; the other two say why, and run on an edit or a run-now request.
func TestAdoptionAfterUpstream(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const adoptNS = "adoption-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: adoptNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Upstream's era: its list, which it ran (results, no generation), and
	// a list under another name, which it never looked at.
	ran := builder.MakeImageList(adoption.UpstreamListName).Images("docker.io/library/alpine:3.18").Obj()
	ignored := builder.MakeImageList("adopt-stale").Images("docker.io/library/nginx:1.25").Obj()
	for _, l := range []*eraserv1.ImageList{ran, ignored} {
		if err := env.Client.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), l) })
	}
	finished := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	ran.Status = eraserv1.ImageListStatus{Timestamp: &finished, Success: 2}
	if err := env.Client.Status().Update(ctx, ran); err != nil {
		t.Fatal(err)
	}
	// The install comes in a later second than the lists (creation times
	// are whole seconds).
	waitForNextSecond(t, ignored.CreationTimestamp.Time)
	since, err := adoption.Since(ctx, env.Client, adoptNS)
	if err != nil {
		t.Fatal(err)
	}
	if !since.After(ignored.CreationTimestamp.Time) {
		t.Fatalf("the install's record (%v) is not after the lists (%v)", since, ignored.CreationTimestamp)
	}
	fresh := builder.MakeImageList("adopt-new").Images("docker.io/library/busybox:1.36").Obj()
	if err := env.Client.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), fresh) })

	doc := []byte("apiVersion: eraser.sh/v1alpha3\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(100)
	r := NewReconciler(env.Client, events, clocktesting.NewFakeClock(time.Now()), eraserconfig.NewStore(cfg, doc), adoptNS, "")
	reconcileList := func(name string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{ran.Name, ignored.Name, fresh.Name} {
		reconcileList(name)
		reconcileList(name) // and again: nothing more happens
	}
	want := map[string]struct {
		jobs   int
		reason string
	}{
		ran.Name:     {0, eraserv1.ReasonUpstreamRan},
		ignored.Name: {0, eraserv1.ReasonNotRunOnAdoption},
		fresh.Name:   {1, ""},
	}
	lists := map[string]*eraserv1.ImageList{ran.Name: ran, ignored.Name: ignored, fresh.Name: fresh}
	for name, w := range want {
		if n := len(jobsOwnedBy(t, lists[name])); n != w.jobs {
			t.Errorf("%s: %d jobs, want %d", name, n, w.jobs)
		}
		if w.reason == "" {
			continue
		}
		got := &eraserv1.ImageList{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(got.Status.Conditions, eraserv1.ConditionReady)
		if c == nil || c.Reason != w.reason || got.Status.ObservedGeneration != got.Generation {
			t.Errorf("%s: Ready %+v, observed generation %d of %d; want reason %s, the generation observed", name, c, got.Status.ObservedGeneration, got.Generation, w.reason)
		}
	}
	if got := &(eraserv1.ImageList{}); env.Client.Get(ctx, client.ObjectKey{Name: ran.Name}, got) == nil &&
		(got.Status.Timestamp == nil || !got.Status.Timestamp.Equal(&finished) || got.Status.Success != 2) {
		t.Errorf("upstream's results were not kept: %+v", got.Status)
	}

	// An edit runs the list upstream ignored; a run-now request runs the
	// one upstream ran.
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ignored.Name}, ignored); err != nil {
		t.Fatal(err)
	}
	ignored.Spec.Images = append(ignored.Spec.Images, "docker.io/library/nginx:1.26")
	if err := env.Client.Update(ctx, ignored); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ran.Name}, ran); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(ran.DeepCopy())
	metav1.SetMetaDataAnnotation(&ran.ObjectMeta, eraserv1.AnnotationRunNow, "after-migration")
	if err := env.Client.Patch(ctx, ran, patch); err != nil {
		t.Fatal(err)
	}
	reconcileList(ignored.Name)
	reconcileList(ran.Name)
	for _, l := range []*eraserv1.ImageList{ignored, ran} {
		if n := len(jobsOwnedBy(t, l)); n != 1 {
			t.Errorf("%s: %d jobs after an edit or run-now request, want 1", l.Name, n)
		}
	}
	if got := &(eraserv1.ImageList{}); env.Client.Get(ctx, client.ObjectKey{Name: ran.Name}, got) == nil && runnow.Requested(got) {
		t.Error("the run-now request was not consumed")
	}
}

// TestAdoptionRunsUpstreamsPendingList: "imagelist" that upstream never got
// to (no results) runs, as upstream would have run it.
func TestAdoptionRunsUpstreamsPendingList(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const pendingNS = "adoption-pending-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pendingNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pending := builder.MakeImageList(adoption.UpstreamListName).Images("docker.io/library/alpine:3.19").Obj()
	if err := env.Client.Create(ctx, pending); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pending) })
	waitForNextSecond(t, pending.CreationTimestamp.Time)
	if _, err := adoption.Since(ctx, env.Client, pendingNS); err != nil {
		t.Fatal(err)
	}
	doc := []byte("apiVersion: eraser.sh/v1alpha3\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(env.Client, record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), eraserconfig.NewStore(cfg, doc), pendingNS, "")
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: pending.Name}}); err != nil {
		t.Fatal(err)
	}
	if n := len(jobsOwnedBy(t, pending)); n != 1 {
		t.Errorf("upstream's pending list: %d jobs, want 1", n)
	}
}

// jobsOwnedBy are the jobs of this list, not of an earlier list of its name.
func jobsOwnedBy(t *testing.T, list *eraserv1.ImageList) []eraserv1.ImageJob {
	t.Helper()
	var own []eraserv1.ImageJob
	for _, j := range jobsOf(t, list.Name) {
		if metav1.IsControlledBy(&j, list) {
			own = append(own, j)
		}
	}
	return own
}

// waitForNextSecond returns once the API server's creation times, whole
// seconds, are later than t's.
func waitForNextSecond(t *testing.T, at time.Time) {
	t.Helper()
	next := at.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next.Add(50 * time.Millisecond)))
}

// TestAdoptionFirstInstall on the real API server: a list applied in the
// same sync as a first install, so created before the install's record,
// runs when the manager found no earlier Eraser; and the manager's survey
// records what it found once, and keeps it.
func TestAdoptionFirstInstall(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const firstNS = "adoption-first-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: firstNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	synced := builder.MakeImageList("adopt-synced").Images("docker.io/library/alpine:3.20").Obj()
	if err := env.Client.Create(ctx, synced); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), synced) })
	waitForNextSecond(t, synced.CreationTimestamp.Time)
	// The record as the manager's survey leaves it where it found no
	// earlier Eraser (other tests' jobs share this API server, so the
	// survey itself would find one here).
	rec := adoption.NewRecord(firstNS)
	rec.Data[adoption.KeyEarlier] = adoption.NoEarlier
	if err := env.Client.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	inst, err := adoption.Survey(ctx, env.Client, firstNS)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Earlier || !inst.Since.After(synced.CreationTimestamp.Time) {
		t.Fatalf("survey of a first install's record: %+v, want no earlier Eraser, dated after the list (%v)", inst, synced.CreationTimestamp)
	}
	doc := []byte("apiVersion: eraser.sh/v1alpha3\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(env.Client, record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), eraserconfig.NewStore(cfg, doc), firstNS, "")
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: synced.Name}}); err != nil {
		t.Fatal(err)
	}
	if n := len(jobsOwnedBy(t, synced)); n != 1 {
		t.Errorf("a list applied with a first install: %d jobs, want 1", n)
	}

	// A record not surveyed yet, with an ImageJob in the cluster (the one
	// just made): the survey records it, and a second survey keeps it.
	const otherNS = "adoption-survey-test"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	inst, err = adoption.Survey(ctx, env.Client, otherNS)
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: otherNS, Name: adoption.RecordName}, got); err != nil {
		t.Fatal(err)
	}
	found := got.Data[adoption.KeyEarlier]
	if !inst.Earlier || !strings.HasPrefix(found, "ImageJob ") {
		t.Fatalf("survey with an ImageJob there: %+v, record says %q; want an earlier Eraser, the job named", inst, found)
	}
	if again, err := adoption.Survey(ctx, env.Client, otherNS); err != nil || again != inst {
		t.Errorf("second survey: %+v, %v; want %+v", again, err, inst)
	}
}
