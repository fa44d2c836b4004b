package holdback

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/crdcheck"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// dropProperties makes CRD name's v1 schema lack properties of the objects
// at its top level (status, spec), as a CRD of another release would. It
// returns what puts the release's schema back, which also runs when the
// test ends.
func dropProperties(t *testing.T, name string, drop map[string][]string) (restore func()) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	ours := crd.Spec.DeepCopy().Versions
	restore = func() { setVersions(t, name, ours) }
	t.Cleanup(restore)

	versions := crd.Spec.DeepCopy().Versions
	for _, v := range versions {
		if v.Name != "v1" {
			continue
		}
		for at, props := range drop {
			node, ok := v.Schema.OpenAPIV3Schema.Properties[at]
			if !ok {
				t.Fatalf("%s v1 has no %s", name, at)
			}
			for _, p := range props {
				if _, ok := node.Properties[p]; !ok {
					t.Fatalf("%s v1 has no %s.%s", name, at, p)
				}
				delete(node.Properties, p) // the map is the copy's
			}
		}
	}
	setVersions(t, name, versions)
	return restore
}

func setVersions(t *testing.T, name string, versions []apiextensionsv1.CustomResourceDefinitionVersion) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		crd.Spec.Versions = versions
		return env.Client.Update(context.Background(), crd)
	})
	if err != nil {
		t.Fatalf("updating CRD %s: %v", name, err)
	}
}

// A manager started over CRDs that would prune its fields runs nothing: it
// says which fields and what to run in a log line at error, in a Warning
// Event on each CRD and in its readiness check, takes no lease, and exits
// (to be restarted with its controllers) once the CRDs are this release's.
func TestHeldBackByCRDsThatLackFields(t *testing.T) {
	testenv.Require(t)
	const namespace = "eraser-system"
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	restoreJobs := dropProperties(t, "imagejobs.eraser.sh", map[string][]string{"status": {"started", "waitingIndexes", "failedIndexes", "report"}})
	restoreLists := dropProperties(t, "imagelists.eraser.sh", map[string][]string{"spec": {"dryRun"}})

	held := startHeldBack(t, namespace)

	jobs := "CRD imagejobs.eraser.sh (v1) lacks status.started, status.waitingIndexes, status.failedIndexes, status.report"
	lists := "CRD imagelists.eraser.sh (v1) lacks spec.dryRun"
	want := lists + "; " + jobs + ": the API server drops the fields a CRD does not declare, so the manager runs nothing until you " + crdcheck.Remedy(namespace)

	code, body := held.ready(t, "crds")
	if diff := cmp.Diff("internal server error: "+want+"\n", body); code != http.StatusInternalServerError || diff != "" {
		t.Errorf("/readyz/crds answered %d (-want +got):\n%s", code, diff)
	}
	if code, _ := get(t, held.base+"/readyz"); code != http.StatusInternalServerError {
		t.Errorf("/readyz answered %d, want 500", code)
	}
	if code, _ := get(t, held.base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz answered %d, want 200: a held-back manager is alive, not to be restarted", code)
	}
	if diff := cmp.Diff([]string{want}, logLines(held.logs.String(), "error")); diff != "" {
		t.Errorf("log lines at error (-want +got):\n%s", diff)
	}
	for crd, finding := range map[string]string{"imagejobs.eraser.sh": jobs, "imagelists.eraser.sh": lists} {
		var events []corev1.Event
		testenv.WaitFor(t, heldDeadline, "the Event on "+crd, func() bool {
			events = env.Events(t, metav1.NamespaceDefault, crd, eraserv1.ReasonMissingFields)
			return len(events) > 0
		})
		ev := events[0]
		got := []string{ev.Type, ev.InvolvedObject.Kind, ev.Source.Component, ev.Message}
		if diff := cmp.Diff([]string{corev1.EventTypeWarning, "CustomResourceDefinition", "eraser-manager", finding + "; " + crdcheck.Remedy(namespace)}, got); diff != "" {
			t.Errorf("Event on %s (-want +got):\n%s", crd, diff)
		}
	}
	held.noLease(t)

	// One CRD fixed: still held back, saying what is left. Both: the
	// manager says so and exits.
	restoreLists()
	testenv.WaitFor(t, heldDeadline, "the readiness check to name only what is left", func() bool {
		_, body = get(t, held.base+"/readyz/crds")
		return strings.Contains(body, jobs) && !strings.Contains(body, lists)
	})
	restoreJobs()
	held.exits(t, "the CRDs being fixed", "the installed CRDs now keep every field the manager writes; exiting")
}

// With this release's CRDs the check finds nothing, and the manager starts
// its controllers.
func TestReadCRDsOurs(t *testing.T) {
	testenv.Require(t)
	findings, err := readCRDs(context.Background(), logr.Discard(), env.Client)
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) > 0 {
		t.Errorf("the release's CRDs: %s", crdcheck.Message(findings, "eraser-system"))
	}
}

// A manager whose role may not read the CRDs goes on unchecked, saying so
// at error.
func TestReadCRDsForbidden(t *testing.T) {
	testenv.Require(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:eraser-system:no-rbac"}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	findings, err := readCRDs(context.Background(), jsonLogger(&logs), c)
	if err != nil || findings != nil {
		t.Fatalf("readCRDs = %v, %v; want nothing, going on", findings, err)
	}
	if diff := cmp.Diff([]string{"cannot check that the installed CRDs keep the fields the manager writes; going on unchecked"}, logLines(logs.String(), "error")); diff != "" {
		t.Errorf("log lines at error (-want +got):\n%s", diff)
	}
}
