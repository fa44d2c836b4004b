package helmtier

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/testing/managertest"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// TestMain removes the manager binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	managertest.Binary.Remove()
	os.Exit(code)
}

// managerProc is the manager binary running as the installed Deployment
// would: its ServiceAccount's permissions, the installed ConfigMap, the
// namespace.
type managerProc struct {
	*managertest.Process
	c *cluster
}

// startManager starts the manager; the test's end stops it.
func (c *cluster) startManager() *managerProc {
	c.t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, cm); err != nil {
		c.t.Fatalf("the installed config: %v", err)
	}
	mgr := managertest.Manager{Kubeconfig: c.serviceAccountKubeconfig(c.t.TempDir()), Namespace: namespace}
	return &managerProc{c: c, Process: mgr.Start(c.t, cm.Data[config.ConfigKey], "--log-level=info")}
}

// waitFor waits for cond, failing at once if the manager exits or the API
// server refuses it.
func (m *managerProc) waitFor(what string, cond func() bool) {
	m.c.t.Helper()
	// Leader election and the first reconcile take seconds; the deadline
	// is many times that, for a busy machine.
	testenv.WaitFor(m.c.t, 3*time.Minute, what, func() bool {
		if m.Exited() {
			m.c.t.Fatalf("the manager exited: code %d", m.WaitExit(m.c.t, 0))
		}
		if strings.Contains(m.Log.String(), "forbidden") {
			m.c.t.Fatal("the API server refused the manager with the installed RBAC")
		}
		return cond()
	})
}

// peakRSS is the manager process's peak resident memory, in bytes.
func (m *managerProc) peakRSS() uint64 {
	m.c.t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.Cmd.Process.Pid))
	if err != nil {
		m.c.t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				m.c.t.Fatal(err)
			}
			return kb << 10
		}
	}
	m.c.t.Fatal("no VmHWM in the manager's status")
	return 0
}

// listState is the ImageList's Ready reason, and whether a job it
// controls exists or it has results.
func (c *cluster) listState(name string) (reason string, ran bool) {
	ctx := context.Background()
	il := &eraserv1.ImageList{}
	if err := c.env.Client.Get(ctx, client.ObjectKey{Name: name}, il); err != nil {
		return "", false
	}
	if cond := meta.FindStatusCondition(il.Status.Conditions, eraserv1.ConditionReady); cond != nil {
		reason = cond.Reason
	}
	var jobs eraserv1.ImageJobList
	if err := c.env.Client.List(ctx, &jobs); err != nil {
		return reason, false
	}
	for i := range jobs.Items {
		if metav1.IsControlledBy(&jobs.Items[i], il) {
			return reason, true
		}
	}
	return reason, false
}

// managerTakesOver runs the manager and waits until it has taken up the
// ImageList list that was there before the migration: its Ready
// condition's reason the one wanted (NotRunOnAdoption, UpstreamRan), or,
// wanted "", a job of it.
func (c *cluster) managerTakesOver(list, reason string) {
	c.t.Helper()
	m := c.startManager()
	m.waitFor("the manager to take up ImageList "+list, func() bool {
		got, ran := c.listState(list)
		if reason != "" {
			return got == reason
		}
		return ran
	})
}

// serviceAccountKubeconfig is the admin kubeconfig impersonating the
// manager's ServiceAccount, so that the manager has exactly the installed
// RBAC, as in its pod.
func (c *cluster) serviceAccountKubeconfig(dir string) string {
	c.t.Helper()
	kc, err := clientcmd.LoadFromFile(c.env.KubeconfigPath)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, user := range kc.AuthInfos {
		user.Impersonate = "system:serviceaccount:" + namespace + ":eraser-controller-manager"
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		c.t.Fatal(err)
	}
	return path
}
