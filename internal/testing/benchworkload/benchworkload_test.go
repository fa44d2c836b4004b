package benchworkload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTemplateMix(t *testing.T) {
	cases := map[int]struct {
		kind string
		zero bool
	}{
		0:  {kind: "*v1.Deployment"},
		7:  {kind: "*v1.Deployment"},
		8:  {kind: "*v1.ReplicaSet", zero: true},
		9:  {kind: "*v1.ReplicaSet"},
		16: {kind: "*v1.StatefulSet"},
		17: {kind: "*v1.DaemonSet"},
		18: {kind: "*v1.Job"},
		19: {kind: "*v1.CronJob"},
	}
	for n, want := range cases {
		obj, zero := Template(n)
		if got := fmt.Sprintf("%T", obj); got != want.kind || zero != want.zero {
			t.Errorf("Template(%d) = %s, zero %v; want %s, zero %v", n, got, zero, want.kind, want.zero)
		}
	}
	// 20 templates: 4 of the 8 ReplicaSets at zero (8, 10, 12, 14), each
	// sharing its app with the next, which is not: all 10 apps stay.
	held, refs := ExpectedTemplates(20)
	if held != 16 || refs != 10+2 {
		t.Errorf("ExpectedTemplates(20) = %d held, %d refs; want 16 and 12", held, refs)
	}
}

func TestPod(t *testing.T) {
	p := Pod(7, Node(3), 100, true)
	if p.Namespace != Team(7) || p.Spec.NodeName != "node-00003" || p.Labels[Label] != "true" {
		t.Errorf("pod %s/%s on %s labels %v", p.Namespace, p.Name, p.Spec.NodeName, p.Labels)
	}
	var images []string
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if !strings.HasSuffix(strings.Split(s.ImageID, "@")[0], strings.Split(s.Image[strings.LastIndexByte(s.Image, '/')+1:], ":")[0]) ||
			!strings.Contains(s.ImageID, "@sha256:") {
			t.Errorf("status of %s: imageID %q does not name its repository by digest", s.Name, s.ImageID)
		}
		images = append(images, s.Image)
	}
	if diff := cmp.Diff([]string{MeshInit, AppImage(7), Sidecar}, images); diff != "" {
		t.Errorf("status images (-want +got):\n%s", diff)
	}
	if q := Pod(7, "", 100, false); q.Status.Phase != "" || len(q.Status.ContainerStatuses) != 0 {
		t.Errorf("a pod not running has status %+v", q.Status)
	}
}
