package holdback

import (
	"context"
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// A manager started while another Eraser manager acts on the same CRDs
// (here the AKS Image Cleaner add-on's Deployment in kube-system) runs
// nothing: it says who and what to do in its readiness check, its log and
// a Warning Event on its ConfigMap, takes no lease, and exits (to be
// restarted with its controllers) once the other is scaled to zero.
func TestHeldBackByAnotherManager(t *testing.T) {
	testenv.Require(t)
	const namespace = "eraser-others"
	ctx := context.Background()
	for _, ns := range []string{namespace, "kube-system"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: configMapName},
		Data: map[string]string{"controller_manager_config.yaml": "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\n"}}
	labels := map[string]string{"control-plane": "controller-manager"}
	addon := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "eraser-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "mcr.microsoft.com/oss/eraser/eraser-manager:v1.3.1"}}}},
		},
	}
	for _, o := range []client.Object{cm, addon} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	held := startHeldBack(t, namespace)

	code, body := held.ready(t, "other-managers")
	for _, want := range []string{"no job runs and nothing is removed while another Eraser manager acts on the eraser.sh CRDs",
		"Deployment kube-system/eraser-controller-manager runs the AKS Image Cleaner add-on v1.3.1", "az aks update --disable-image-cleaner"} {
		if code != http.StatusInternalServerError || !strings.Contains(body, want) {
			t.Errorf("/readyz/other-managers answered %d %q; want 500 with %q", code, body, want)
		}
	}
	if errs := logLines(held.logs.String(), "error"); len(errs) != 1 || !strings.Contains(errs[0], "az aks update") {
		t.Errorf("log lines at error: %q", errs)
	}
	var events []corev1.Event
	testenv.WaitFor(t, heldDeadline, "the Event on the ConfigMap", func() bool {
		events = env.Events(t, namespace, configMapName, eraserv1.ReasonOtherManager)
		return len(events) > 0
	})
	if ev := events[0]; ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, "AKS Image Cleaner") {
		t.Errorf("Event: %s %q", ev.Type, ev.Message)
	}
	held.noLease(t)

	// The add-on turned off (AKS scales it away): the manager says so and
	// exits.
	zero := int32(0)
	addon.Spec.Replicas = &zero
	if err := env.Client.Update(ctx, addon); err != nil {
		t.Fatal(err)
	}
	held.exits(t, "the other manager going", "no other Eraser manager acts on the CRDs any more; exiting")
}
