package helmtier

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/builder"
	"github.com/eraser-oss/eraser/internal/testing/repo"
)

// upstreamValues is the project's fixture of upstream's v1.x values file:
// upstream's images, its manager's 30Mi limit, Windows nodes left out.
func upstreamValues() string {
	return filepath.Join(repo.Root(), "internal", "wire", "config", "testdata", "upstream", "values-v1alpha3.yaml")
}

// managerPeakAtThousandNodes is the manager's measured peak at 1,000 nodes
// as docs/install.md's sizing table gives it (its upper figure): a cluster
// of two nodes stays under it.
const managerPeakAtThousandNodes = 83 << 20

// A platform team's migration, with each Helm CLI, upgrading with
// upstream's values file or with --reuse-values: upstream's release with
// upstream's values, a Linux and a Windows node, and three ImageLists: the
// "imagelist" upstream ran, one upstream ignored, and one created after the
// upgrade. Only the third runs; the Windows node gets no worker; the
// manager runs with this chart's memory (upstream's 30Mi translated) and
// peaks under the docs' figure; the NOTES say what was translated and
// which lists wait.
func TestMigrationFromUpstreamRelease(t *testing.T) {
	for how, args := range map[string][]string{
		"values file":  {"-f", upstreamValues()},
		"reuse-values": {"--reuse-values"},
	} {
		t.Run(how, func(t *testing.T) {
			eachHelm(t, func(t *testing.T, c *cluster) { migrate(t, c, args, how == "values file") })
		})
	}
}

func migrate(t *testing.T, c *cluster, upgradeArgs []string, translatedNotes bool) {
	ctx := context.Background()
	c.createNamespace()
	c.helm("install", release, upstreamShapedChart(), "-n", namespace, "-f", upstreamValues())
	c.waitEstablished()
	for _, n := range []*corev1.Node{builder.MakeNode("migrate-linux").OS("linux").Obj(), builder.MakeNode("migrate-windows").OS("windows").Obj()} {
		if err := c.env.Client.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	// Upstream's era: the list it ran (its results, no generation of
	// ours), and one under a name it ignored.
	ran := builder.MakeImageList("imagelist").Images("docker.io/library/alpine:3.18").Obj()
	ignored := builder.MakeImageList("team-a-cleanup").Images("docker.io/library/nginx:1.25").Obj()
	for _, l := range []*eraserv1.ImageList{ran, ignored} {
		if err := c.env.Client.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	done := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	ran.Status = eraserv1.ImageListStatus{Timestamp: &done, Success: 1}
	if err := c.env.Client.Status().Update(ctx, ran); err != nil {
		t.Fatal(err)
	}
	// Creation times are whole seconds: the upgrade comes in a later one.
	time.Sleep(time.Until(ignored.CreationTimestamp.Add(1100 * time.Millisecond)))

	out := c.helm(append(append([]string{"upgrade", release, ourChart(), "-n", namespace}, upgradeArgs...), releaseImages...)...)
	if !strings.Contains(out, "run only if upstream Eraser would have run them") {
		t.Errorf("the NOTES do not say which lists run:\n%s", out)
	}
	if translatedNotes && !strings.Contains(out, "deploy.resources (memory limit 30Mi, request 20Mi) are upstream's manager's") {
		t.Errorf("the NOTES do not name upstream's memory values translated:\n%s", out)
	}
	dep := &appsv1.Deployment{}
	if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "eraser-controller-manager"}, dep); err != nil {
		t.Fatal(err)
	}
	limit := dep.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if limit.Cmp(resource.MustParse("128Mi")) < 0 {
		t.Errorf("the manager's memory limit is %s after the upgrade: under what it needs", limit.String())
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "registry.example/eraser/eraser-manager:") {
		t.Errorf("the manager's image is %s after the upgrade, not the release's", img)
	}

	after := builder.MakeImageList("after-migration").Images("docker.io/library/busybox:1.36").Obj()
	if err := c.env.Client.Create(ctx, after); err != nil {
		t.Fatal(err)
	}
	m := c.startManager()
	m.waitFor("the lists judged", func() bool {
		r1, ran1 := c.listState(ran.Name)
		r2, ran2 := c.listState(ignored.Name)
		_, ran3 := c.listState(after.Name)
		return r1 == eraserv1.ReasonUpstreamRan && r2 == eraserv1.ReasonNotRunOnAdoption && ran3 && !ran1 && !ran2
	})
	var pods corev1.PodList
	m.waitFor("the new list's worker pod", func() bool {
		if err := c.env.Client.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{podspec.LabelJob}); err != nil {
			return false
		}
		return len(pods.Items) > 0
	})
	for _, p := range pods.Items {
		if p.Spec.NodeName != "migrate-linux" {
			t.Errorf("worker pod %s on node %s: only the Linux node may get one", p.Name, p.Spec.NodeName)
		}
	}
	for _, name := range []string{ran.Name, ignored.Name} {
		if _, ranIt := c.listState(name); ranIt {
			t.Errorf("ImageList %s, there before the install, got a job", name)
		}
	}
	if peak := m.peakRSS(); peak > managerPeakAtThousandNodes {
		t.Errorf("the manager peaked at %d MiB on two nodes, over the %d MiB docs/install.md gives for 1,000", peak>>20, managerPeakAtThousandNodes>>20)
	} else {
		t.Logf("the manager's peak: %d MiB (limit %s)", peak>>20, limit.String())
	}
}
