package fault_test

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/jobdata"
	"github.com/eraser-oss/eraser/internal/manager/podspec"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// hugeImage is what a tenant may give a container's image: Kubernetes
// puts no length limit on it. Random base64 compresses to about 3/4 of
// its length, so 1,228,821 bytes are more than one part of the cluster's
// references holds (900 KiB) even compressed.
func hugeImage(t *testing.T) string {
	t.Helper()
	raw := make([]byte, 1_228_821)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw)[:len(raw)]
}

// TestTenantImageDoesNotStopRuns: a Deployment at zero replicas in a
// tenant's namespace, with a 1.2 MB image, then an ImageList. The run
// creates its pods and ends, the image is left out of the references with
// a warning Event on the Deployment, a count on the metrics endpoint and a
// log line, and the workers mount a set that was written whole.
func TestTenantImageDoesNotStopRuns(t *testing.T) {
	s := newScenario(t, "fault-tenant", nil)
	const tenant = "tenant-a"
	if err := env.Client.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}) })
	image := hugeImage(t)
	labels := map[string]string{"app": "big"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "big"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}, {Name: "web", Image: "docker.io/library/nginx:1.27"}}},
			},
		},
	}
	// The API server takes bodies up to 3 MiB, etcd values up to 1.5 MiB.
	if err := env.Client.Create(s.ctx, dep); err != nil {
		t.Fatalf("creating a Deployment with a %d-byte image: %v", len(image), err)
	}
	// By hand: no namespace controller runs here to empty the namespace.
	t.Cleanup(func() { _ = env.Client.Delete(s.ctx, dep) })
	s.addNodes(s.ns, 3)
	metricsAddr := testenv.FreePort(t)
	mgr := s.startManager(config("5m", "1.0", "0", ""), "--metrics-bind-address="+metricsAddr)
	s.createList()

	// Minutes: a loaded 2-core machine starts the manager, syncs its
	// index and fans out 3 pods in seconds.
	job := s.waitJob(5*time.Minute, "the run to create its pods and end", func() { s.kubelet(nil) }, finished)
	c := ready(job.Status.Conditions)
	t.Logf("job %s %s: %s", job.Name, job.Status.Phase, c.Message)
	if job.Status.Phase != eraserv1.PhaseCompleted || job.Status.Succeeded != 3 {
		t.Errorf("job %s with %d succeeded, want Completed on all 3 nodes", job.Status.Phase, job.Status.Succeeded)
	}
	pods := s.pods()
	if len(pods) != 3 {
		t.Errorf("%d worker pods, want 3", len(pods))
	}
	for _, p := range pods {
		if p.Labels[jobdata.LabelReferenceSet] == "" || p.Labels[jobdata.LabelReferenceSet] == "incomplete" {
			t.Errorf("pod %s mounts set %q, want a set written whole", p.Name, p.Labels[jobdata.LabelReferenceSet])
		}
	}
	var parts corev1.ConfigMapList
	if err := env.Client.List(s.ctx, &parts, client.InNamespace(s.ns), client.MatchingLabels{eraserv1.LabelReferences: "true", podspec.LabelJob: job.Name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts.Items {
		if n := len(p.BinaryData["references.gz"]); n > 64*1024 {
			t.Errorf("part %s is %d bytes: the image was not left out", p.Name, n)
		}
	}

	var evs []corev1.Event
	testenv.WaitFor(t, 2*time.Minute, "an ImageDropped Event on the Deployment", func() bool {
		var list corev1.EventList
		if err := env.Client.List(s.ctx, &list, client.InNamespace(tenant)); err != nil {
			return false
		}
		evs = nil
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Deployment" && e.InvolvedObject.Name == "big" {
				evs = append(evs, e)
			}
		}
		return findEvent(evs, "ImageDropped", "over 4096 bytes") != nil
	})
	t.Logf("Deployment events:%s", describeEvents(evs))
	if e := findEvent(evs, "ImageDropped"); e.Type != corev1.EventTypeWarning || e.InvolvedObject.UID == "" || !strings.Contains(e.Message, fmt.Sprint(len(image))) {
		t.Errorf("Event %+v, want a Warning on the Deployment naming the image's length", e)
	}
	if got := droppedMetric(t, metricsAddr); got < 1 {
		t.Errorf("eraser_inputs_dropped_total{source=workload_image,reason=too_long} = %v, want at least 1", got)
	}
	if l := mgr.Lines("images left out of the references", `"name":"big"`); len(l) == 0 {
		t.Error("no log line names the Deployment whose image was left out")
	} else {
		t.Logf("manager log: %.300s", l[0])
	}
}

// droppedMetric reads the manager's count of images left out as too long.
func droppedMetric(t *testing.T, addr string) float64 {
	t.Helper()
	var v float64
	testenv.WaitFor(t, time.Minute, "the manager's metrics endpoint", func() bool {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false
		}
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "eraser_inputs_dropped_total{") && strings.Contains(line, `reason="too_long"`) && strings.Contains(line, `source="workload_image"`) {
				_, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
				return err == nil
			}
		}
		return false
	})
	return v
}
