package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/eraserconfig"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestManagerStartsWithLastGoodConfig: an edit that hot reload refused is
// still in the ConfigMap when the manager restarts. The restarted manager
// starts with the last good configuration on record, stays ready, and says
// so in its log, an Event and a metric; with no record it refuses to start.
func TestManagerStartsWithLastGoodConfig(t *testing.T) {
	testenv.Require(t)
	const ns = "eraser-lastgood"
	ctx := context.Background()
	ensureNamespace(t, ns)
	good := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 0.5}}\n"
	bad := "apiVersion: eraser.sh/v1alpha3\nkind: EraserConfig\nmanager: {imageJob: {successRatio: 7}}\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.ConfigMapName},
		Data: map[string]string{config.ConfigKey: bad}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	m := managerIn(ns)

	// Never a good one: held back rather than crash-looping; live, unready,
	// the error in its log and in an Event on the ConfigMap. Fixed, it
	// exits to be restarted with the fix.
	probe := testenv.FreePort(t)
	first := m.Start(t, bad, "--leader-elect=false", "--health-probe-bind-address="+probe)
	testenv.WaitFor(t, 30*time.Second, "the held-back manager, live and unready", func() bool {
		live, _, lerr := get("http://" + probe + "/healthz")
		ready, body, rerr := get("http://" + probe + "/readyz?verbose")
		return lerr == nil && rerr == nil && live == 200 && ready != 200 && strings.Contains(body, "config-invalid")
	})
	waitEvent(t, ns, cm.Name, eraserv1.ReasonInvalidConfig, "manager.imageJob.successRatio")
	if !strings.Contains(first.Log.String(), "no job runs and nothing is removed") {
		t.Errorf("the log does not say the manager is held back:\n%s", first.Log)
	}

	// A manager that ran with the good document records it.
	cm.Data[config.ConfigKey] = good
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if code := first.WaitExit(t, 2*time.Minute); code != 0 {
		t.Fatalf("the held-back manager, its ConfigMap fixed: exit %d, want 0 (to restart with it):\n%s", code, first.Log)
	}
	running := m.Start(t, good, "--leader-elect=false")
	recordKey := eraserconfig.RecordKey(client.ObjectKeyFromObject(cm))
	testenv.WaitFor(t, 30*time.Second, "the last good record", func() bool {
		raw, err := eraserconfig.Recorded(ctx, env.Client, client.ObjectKeyFromObject(cm), config.ConfigKey)
		return err == nil && string(raw) == good
	})
	// The edit hot reload refuses; then the restart.
	cm.Data[config.ConfigKey] = bad
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "the refusal", func() bool { return strings.Contains(running.Log.String(), "invalid EraserConfig refused") })
	running.Stop()

	probe, metrics := testenv.FreePort(t), testenv.FreePort(t)
	restarted := m.Start(t, bad, "--leader-elect=false", "--health-probe-bind-address="+probe, "--metrics-bind-address="+metrics)
	testenv.WaitFor(t, 60*time.Second, "readiness on the last good configuration", func() bool {
		code, _, err := get("http://" + probe + "/readyz")
		return err == nil && code == 200
	})
	if log := restarted.Log.String(); !strings.Contains(log, "starting with the last good configuration on record") ||
		!strings.Contains(log, "manager.imageJob.successRatio") || !strings.Contains(log, recordKey.Name) {
		t.Errorf("the log does not say which configuration is in force and why:\n%s", log)
	}
	testenv.WaitFor(t, 30*time.Second, "an InvalidConfig Event on the ConfigMap", func() bool {
		var events corev1.EventList
		_ = env.Client.List(ctx, &events, client.InNamespace(ns))
		for _, e := range events.Items {
			if e.InvolvedObject.Name == cm.Name && e.Reason == "InvalidConfig" && e.Count > 0 && e.LastTimestamp.After(time.Now().Add(-time.Minute)) {
				return true
			}
		}
		return false
	})
	testenv.WaitFor(t, 30*time.Second, "the reload metric at 0", func() bool {
		_, body, err := get("http://" + metrics + "/metrics")
		return err == nil && strings.Contains(body, "eraser_config_last_reload_successful 0")
	})
}
