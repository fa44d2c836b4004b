package imagejob

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/manager/imagelist"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestUpstreamIncludeConfiguration: upstream's include configuration, whose
// only selector is eraser.sh/cleanup.filter, runs an ImageList on exactly the
// labelled nodes, as upstream's imagelist_include_nodes has it; the list's
// job is made by the ImageList reconciler, as in the manager.
func TestUpstreamIncludeConfiguration(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 10 {
		n := builder.MakeNode(fmt.Sprintf("include-%02d", i))
		if i%3 == 1 {
			n.Label(config.CleanupFilterLabel, "")
			want = append(want, n.Name)
		}
		f.nodes(n.Obj())
	}
	doc := []byte(baseConfig + "manager: {nodeFilter: {type: include, selectors: [" + config.CleanupFilterLabel + "]}}\n")
	cfg, _, err := config.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adoption.Since(f.ctx, env.Client, f.ns); err != nil {
		t.Fatal(err)
	}
	list := builder.MakeImageList("upstream-include").Images("nginx").Obj()
	if err := env.Client.Create(f.ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(f.ctx, list) })
	lists := imagelist.NewReconciler(env.Client, record.NewFakeRecorder(100), f.clock, eraserconfig.NewStore(cfg, doc), f.ns, "")
	if _, err := lists.Reconcile(f.ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: list.Name}}); err != nil {
		t.Fatal(err)
	}
	job := imagelist.JobName(list)
	f.reconcile(job)
	var got []string
	for _, p := range f.pods(job) {
		got = append(got, p.Spec.NodeName)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes with a worker pod (-want +got):\n%s", diff)
	}
	if st := f.get(job).Status; st.Desired != 10 || st.Skipped != 7 {
		t.Errorf("desired %d, skipped %d; want 10 and 7", st.Desired, st.Skipped)
	}
}
