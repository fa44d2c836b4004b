package main_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/manager/adoption"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

var env *testenv.Env

// TestMain shares one control plane and one build of the real manager
// binary among the tests, each made by the first test needing it.
func TestMain(m *testing.M) {
	code := testenv.Run(m, &env)
	managertest.Binary.Remove()
	pluginBin.Remove()
	os.Exit(code)
}

// managerIn is a manager of the test control plane with namespace ns as
// its own.
func managerIn(ns string) managertest.Manager {
	return managertest.Manager{Kubeconfig: env.KubeconfigPath, Namespace: ns}
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

// deleteScheduledJobs deletes the scheduled jobs there are at the test's
// end, after its manager stops: jobs are cluster-wide, and a later test
// counts its own.
func deleteScheduledJobs(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		_ = env.Client.DeleteAllOf(context.Background(), &eraserv1.ImageJob{}, client.MatchingLabels{eraserv1.LabelJobOwner: eraserv1.JobOwnerCollector})
	})
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The install's record, as the chart and manifest create it, before
	// any list: lists made while the manager starts are after the install.
	if _, err := adoption.Since(context.Background(), env.Client, name); err != nil {
		t.Fatal(err)
	}
}

// TestManagerBecomesReady runs the real binary against the real API server:
// probes, metrics, leader election, and a clean shutdown that hands the
// lease back.
func TestManagerBecomesReady(t *testing.T) {
	testenv.Require(t)
	ensureNamespace(t, "eraser-system")
	probe, metrics := testenv.FreePort(t), testenv.FreePort(t)
	p := managerIn("eraser-system").Start(t, "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nhealth: {}\n",
		"--health-probe-bind-address="+probe, "--metrics-bind-address="+metrics)

	deadline := time.Now().Add(60 * time.Second)
	for {
		code, _, err := get("http://" + probe + "/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 60s: code %d, err %v", code, err)
		}
		if p.Exited() {
			t.Fatalf("manager exited: code %d", p.WaitExit(t, 0))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body, err := get("http://" + probe + "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz: %d %q %v", code, body, err)
	}
	code, body, err := get("http://" + metrics + "/metrics")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "controller_runtime_") {
		t.Errorf("/metrics: %d %v, body starts %.200q", code, err, body)
	}

	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: "eraser-system", Name: manager.LeaderElectionID}
	testenv.WaitFor(t, 30*time.Second, "the leader lease", func() bool {
		return env.Client.Get(context.Background(), key, lease) == nil &&
			lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	})
	if !strings.Contains(p.Log.String(), `"EraserConfig warning"`) || !strings.Contains(p.Log.String(), "health: ignored") {
		t.Errorf("the ignored key was not logged as a warning")
	}

	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.WaitExit(t, 30*time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if err := env.Client.Get(context.Background(), key, lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("lease still held by %q after a clean shutdown", *h)
	}
}

// TestManagerRefusesInvalidConfig: a bad config stops the manager at start-up
// with the field at fault in its log, before it touches the cluster.
func TestManagerRefusesInvalidConfig(t *testing.T) {
	cases := map[string]struct {
		doc  string
		args []string
		want []string
	}{
		"ratio":                   {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {imageJob: {successRatio: 3}}", want: []string{"manager.imageJob.successRatio", "between 0 and 1"}},
		"unknown key":             {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {nodeFilter: {selector: [a=b]}}", want: []string{"manager.nodeFilter.selector", "selectors"}},
		"filter type":             {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {nodeFilter: {type: all}}", want: []string{"manager.nodeFilter.type"}},
		"api version":             {doc: "apiVersion: eraser.sh/v9\n", want: []string{"apiVersion", "Unsupported value"}},
		"runtime":                 {doc: "apiVersion: eraser.sh/v1alpha3\nmanager: {runtime: {name: containerd, address: 'tcp://h:1'}}", want: []string{"manager.runtime.address"}},
		"scanning on cri-dockerd": {doc: "apiVersion: eraser.sh/v1alpha2\nmanager: {runtime: dockershim}\ncomponents: {collector: {enabled: true}, scanner: {enabled: true}}", want: []string{"components.scanner.enabled", "containerd and CRI-O only"}},
		"remover image":           {doc: "apiVersion: eraser.sh/v1alpha3\n", args: []string{"--remover-image=a b"}, want: []string{"--remover-image"}},
		"missing --config":        {want: []string{"--config is required"}},
		"missing file":            {args: []string{"--config=/nonexistent/config.yaml"}, want: []string{"reading EraserConfig", "/nonexistent/config.yaml"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--kubeconfig=/nonexistent/kubeconfig"}, tc.args...)
			if tc.doc != "" {
				args = append(args, "--config="+managertest.WriteConfig(t, tc.doc))
			}
			p := managertest.Manager{}.Exec(t, args...)
			if code := p.WaitExit(t, 30*time.Second); code != 1 {
				t.Errorf("exit code = %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.Log.String(), w) {
					t.Errorf("log does not mention %q:\n%s", w, p.Log)
				}
			}
		})
	}
}

func TestManagerRejectsBadFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"log level":     {args: []string{"--log-level=loud"}, want: "log-level"},
		"lease timings": {args: []string{"--leader-elect-renew-deadline=20s"}, want: "--leader-elect-renew-deadline (20s) < --leader-elect-lease-duration (15s)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := managertest.Manager{}.Exec(t, tc.args...)
			if code := p.WaitExit(t, 30*time.Second); code != 2 {
				t.Errorf("exit code = %d, want 2 (usage)", code)
			}
			if !strings.Contains(p.Log.String(), tc.want) {
				t.Errorf("usage error does not say %q:\n%s", tc.want, p.Log)
			}
		})
	}
}
