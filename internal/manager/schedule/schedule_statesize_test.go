package schedule

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/schedtimes"
)

// TestStateTooLargeScheduleGoesOn: a finished run whose per-node record
// would take the state past its bound (lowered here) is recorded all the
// same: the state is written without the record, with an error Event, the
// job is marked recorded (its cleanup may go on), and the next run starts
// when it is due.
func TestStateTooLargeScheduleGoesOn(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := "schedule-statesize"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const on = "apiVersion: eraser.sh/v1alpha3\nmanager: {scheduling: {repeatInterval: 6h, beginImmediately: true}}\ncomponents: {collector: {enabled: true}}\n"
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	events := record.NewFakeRecorder(100)
	r := NewReconciler(env.Client, events, clk, store(t, on), nil, ns, "")
	r.stateLimit = 2000
	reconcileOnce := reconciler(t, ctx, r)

	reconcileOnce()
	jobs := scheduledJobs(t, ctx)
	if len(jobs) != 1 {
		t.Fatalf("%d scheduled jobs, want 1 at once", len(jobs))
	}
	job := jobs[0]
	const nodes = 50
	var n jobdata.Nodes
	for i := range nodes {
		n.Targets = append(n.Targets, nodefilter.Target{Name: fmt.Sprintf("node-%03d.%s", i, strings.Repeat("x", 60)), OS: "linux"})
	}
	if err := jobdata.CreateNodes(ctx, env.Client, ns, &job, n); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	end := metav1.NewTime(clk.Now())
	job.Status = eraserv1.ImageJobStatus{Phase: eraserv1.PhaseCompleted, CompletionTime: &end, Started: nodes}
	if err := env.Client.Status().Update(ctx, &job); err != nil {
		t.Fatal(err)
	}
	if wait := reconcileOnce(); wait != 6*time.Hour {
		t.Errorf("next run in %v, want 6h after the end", wait)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&job), &job); err != nil || job.Annotations[eraserv1.AnnotationRecorded] != "true" {
		t.Errorf("finished job not marked recorded: %v %v", job.Annotations, err)
	}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: StateName}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[schedtimes.KeyLastEnd] != end.UTC().Format(time.RFC3339) || cm.Data[keySince] != "" || cm.Data[keyCleaned] != "" || cm.BinaryData != nil {
		t.Errorf("state %v (binary %v): want lastEnd %s and no per-node record", cm.Data, len(cm.BinaryData), end.UTC().Format(time.RFC3339))
	}
	// The fake recorder sends each Event as it is made.
	var found string
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.Contains(e, eraserv1.ReasonScheduleStateTooLarge) {
			found = e
		}
	}
	if !strings.HasPrefix(found, corev1.EventTypeWarning) || !strings.Contains(found, "50 nodes") {
		t.Errorf("event %q: want a Warning %s counting the 50 nodes", found, eraserv1.ReasonScheduleStateTooLarge)
	}
	if err := env.Client.Delete(ctx, &job); err != nil {
		t.Fatal(err)
	}

	clk.Step(6 * time.Hour)
	reconcileOnce()
	if jobs := scheduledJobs(t, ctx); len(jobs) != 1 || jobs[0].Name == job.Name {
		t.Errorf("scheduled jobs %d after the interval, want the next run", len(jobs))
	}
}
