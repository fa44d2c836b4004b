package holdback

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// heldDeadline is many times what a loaded 2-core machine needs.
const heldDeadline = 2 * time.Minute

// configMapName is the EraserConfig ConfigMap's in the tests.
const configMapName = "eraser-manager-config"

// heldBack is a manager started against the test API server as the
// manager's start does: what holds it back found, then run held back,
// looking again every half second.
type heldBack struct {
	namespace string
	base      string
	logs      *testenv.Buffer
	done      chan error
}

func startHeldBack(t *testing.T, namespace string) *heldBack {
	t.Helper()
	h := &heldBack{namespace: namespace, logs: &testenv.Buffer{}, done: make(chan error, 1)}
	log := jsonLogger(h.logs)
	ctrl.SetLogger(log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cause, err := Find(ctx, log, env.Client, client.ObjectKey{Namespace: namespace, Name: configMapName})
	if err != nil || cause == nil {
		t.Fatalf("Find = %v, %v; want a cause to hold the manager back", cause, err)
	}
	opts := Options{Scheme: env.Client.Scheme(), ProbeAddr: testenv.FreePort(t), MetricsAddr: "0", EventSource: "eraser-manager", Every: 500 * time.Millisecond}
	h.base = "http://" + opts.ProbeAddr
	go func() { h.done <- Run(ctx, log, env.Config, opts, cause) }()
	return h
}

// ready waits for the readiness check name to answer, and returns its
// answer.
func (h *heldBack) ready(t *testing.T, name string) (int, string) {
	t.Helper()
	var code int
	var body string
	testenv.WaitFor(t, heldDeadline, "the readiness check", func() bool {
		code, body = get(t, h.base+"/readyz/"+name)
		return code != 0
	})
	return code, body
}

// noLease checks that the held-back manager took no lease.
func (h *heldBack) noLease(t *testing.T) {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &leases, client.InNamespace(h.namespace)); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) > 0 {
		t.Errorf("a held-back manager took the lease %s", leases.Items[0].Name)
	}
}

// exits checks that the manager exits, saying why, within heldDeadline of
// what ends the cause.
func (h *heldBack) exits(t *testing.T, after, says string) {
	t.Helper()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatalf("Run returned %v after %s; want nil (exit, to be restarted)", err, after)
		}
	case <-time.After(heldDeadline):
		t.Fatalf("Run did not return within %v of %s; its log:\n%s", heldDeadline, after, h.logs.String())
	}
	if !strings.Contains(h.logs.String(), says) {
		t.Errorf("the manager did not say why it exits; its log:\n%s", h.logs.String())
	}
}

// jsonLogger logs JSON lines to w, as the manager does.
func jsonLogger(w io.Writer) logr.Logger {
	return zap.New(zap.WriteTo(w), zap.UseDevMode(false))
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// logLines are the manager's JSON log lines at level.
func logLines(out, level string) []string {
	var msgs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Level == level {
			msgs = append(msgs, line.Msg)
		}
	}
	return msgs
}
