package imagejob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/nodefilter"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
)

func TestMissingData(t *testing.T) {
	f := newFixture(t)
	job := builder.MakeImageJob("nodata").Obj()
	if err := env.Client.Create(f.ctx, job); err != nil {
		t.Fatal(err)
	}
	if res := f.reconcile("nodata"); res.RequeueAfter == 0 {
		t.Error("no requeue while the ConfigMap may still come")
	}
	f.clock.Step(2 * time.Minute)
	f.reconcile("nodata")
	job = f.get("nodata")
	if job.Status.Phase != eraserv1.PhaseFailed || meta.FindStatusCondition(job.Status.Conditions, eraserv1.ConditionReady).Reason != "ConfigMissing" {
		t.Fatalf("status %+v", job.Status)
	}
}

// TestIncludeFilter: upstream's imagelist_include_nodes at the API level.
func TestIncludeFilter(t *testing.T) {
	f := newFixture(t)
	f.nodes(builder.MakeNode("in").Label("eraser-target", "yes").Obj(), builder.MakeNode("out").Obj())
	f.job("include", podspec.KindManual, baseConfig+"manager: {nodeFilter: {type: include, selectors: [eraser-target=yes]}}", "nginx")
	f.reconcile("include")
	pods := f.pods("include")
	if len(pods) != 1 || pods[0].Spec.NodeName != "in" {
		t.Fatalf("pods %v, want one on the included node", len(pods))
	}
	if job := f.get("include"); job.Status.Skipped != 1 || job.Status.Desired != 2 {
		t.Errorf("status %+v", job.Status)
	}
}

// TestConfine: a catch-up run keeps only its nodes, in the node list's
// order, skipped ones included; nil keeps every node.
func TestConfine(t *testing.T) {
	all := jobdata.Nodes{
		Targets: []nodefilter.Target{{Name: "a", OS: "linux"}, {Name: "b", OS: "linux"}, {Name: "c", OS: "windows"}},
		Skipped: []nodefilter.Skipped{{Name: "d", Reason: eraserv1.ReasonNotReady}},
	}
	cases := map[string]struct {
		only []string
		want jobdata.Nodes
	}{
		"nil: all":   {want: all},
		"some":       {only: []string{"c", "a", "gone"}, want: jobdata.Nodes{Targets: []nodefilter.Target{all.Targets[0], all.Targets[2]}, Skipped: []nodefilter.Skipped{}}},
		"a skipped":  {only: []string{"d"}, want: jobdata.Nodes{Targets: []nodefilter.Target{}, Skipped: all.Skipped}},
		"empty list": {only: []string{}, want: jobdata.Nodes{Targets: []nodefilter.Target{}, Skipped: []nodefilter.Skipped{}}},
	}
	got, want := map[string]jobdata.Nodes{}, map[string]jobdata.Nodes{}
	for name, tc := range cases {
		got[name], want[name] = confine(all, tc.only), tc.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("confine (-want +got):\n%s", diff)
	}
}
