//go:build linux

package kubelet

// The report of a run outlives its pods.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/reportshards"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// reportOutlivesThePods: after a real run, the job's report says per node
// what was removed and what was kept (a running container's image), after
// the worker pods are gone; kubectl eraser report (through the real kubectl)
// prints it; and deleting the job deletes the report.
func reportOutlivesThePods(t *testing.T) {
	setConfig(t, strings.Replace(baseConfig, "keepReportFor: 0s", "keepReportFor: 1h", 1))
	t.Cleanup(func() { setConfig(t, baseConfig) })
	reported, used := testImage("reported"), testImage("used")
	seed(t, cluster.Nodes, reported, used)
	busy := cluster.Nodes[0].Name
	runPod(t, busy, "uses-image", used)

	il := runImageList(t, "reported", reported, used)
	ctx := testCtx(t)
	job := &eraserv1.ImageJob{}
	eventually(t, 2*time.Minute, "the report to be complete and the worker pods gone", func() (bool, string) {
		if err := kube.Get(ctx, client.ObjectKey{Name: il.Status.Job}, job); err != nil {
			return false, fmt.Sprintf("ImageJob %q: %v", il.Status.Job, err)
		}
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{labelJob: job.Name}); err != nil {
			return false, err.Error()
		}
		rep := job.Status.Report
		return rep != nil && rep.Complete && len(pods.Items) == 0, fmt.Sprintf("report %+v, %d pods", rep, len(pods.Items))
	})
	shards, err := reportshards.Shards(ctx, kube, job.Status.Report.Namespace, job)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := nodereport.Read(shards, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes = ran(nodes)
	if len(nodes) != len(cluster.Nodes) {
		t.Fatalf("report of %d nodes, want %d: %+v", len(nodes), len(cluster.Nodes), nodes)
	}
	for _, n := range nodes {
		outcomes := map[string]string{}
		for _, e := range n.Entries {
			outcomes[e.Image] = e.Outcome
		}
		wantUsed := "removed"
		if n.Name == busy {
			wantUsed = "in use"
		}
		if n.Unavailable != "" || outcomes[reported] != "removed" || outcomes[used] != wantUsed {
			t.Errorf("node %s: entries %v (unavailable: %q); want %s removed, %s %s", n.Name, outcomes, n.Unavailable, reported, used, wantUsed)
		}
	}

	out := kubectlEraser(t, "report", "imagelist/reported", "--node", busy)
	for _, want := range []string{busy, reported, "removed", used, "in use"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl eraser report lacks %q:\n%s", want, out)
		}
	}

	// Deleting the job deletes its report (the garbage collector follows
	// the shards' owner reference).
	if err := kube.Delete(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the report to go with its job", func() (bool, string) {
		var cms corev1.ConfigMapList
		if err := kube.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{eraserv1.LabelReport}); err != nil {
			return false, err.Error()
		}
		return len(cms.Items) == 0, fmt.Sprintf("%d report ConfigMaps", len(cms.Items))
	})
}
