package helmtier

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// managerBin is the real manager binary, built once for the package by
// the first test running it.
var managerBin = testenv.NewBinary("github.com/eraser-oss/eraser/cmd/manager")

func TestMain(m *testing.M) {
	code := m.Run()
	managerBin.Remove()
	os.Exit(code)
}

// managerReconciles runs the manager binary as the installed Deployment
// would (its ServiceAccount's permissions, the installed ConfigMap, the
// namespace) and waits until it has taken up the ImageList list that was
// there before the migration: a job controlled by it, or its status written.
func (c *cluster) managerReconciles(list string) {
	c.t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: manager.DefaultConfigMapName}, cm); err != nil {
		c.t.Fatalf("the installed config: %v", err)
	}
	dir := c.t.TempDir()
	file := filepath.Join(dir, manager.ConfigKey)
	if err := os.WriteFile(file, []byte(cm.Data[manager.ConfigKey]), 0o600); err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(managerBin.Path(c.t), "--kubeconfig="+c.serviceAccountKubeconfig(dir), "--config="+file,
		"--health-probe-bind-address="+testenv.FreePort(c.t), "--metrics-bind-address=0")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+namespace)
	logs := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
		if c.t.Failed() {
			c.t.Logf("manager log:\n%s", logs.String())
		}
	}()
	// Leader election and the first reconcile take seconds; the deadline
	// is many times that, for a busy machine.
	testenv.WaitFor(c.t, 3*time.Minute, "the manager to take up ImageList "+list, func() bool {
		select {
		case err := <-exited:
			exited <- err
			c.t.Fatalf("the manager exited: %v", err)
		default:
		}
		if strings.Contains(logs.String(), "forbidden") {
			c.t.Fatal("the API server refused the manager with the installed RBAC")
		}
		il := &eraserv1.ImageList{}
		if err := c.env.Client.Get(ctx, client.ObjectKey{Name: list}, il); err != nil {
			return false
		}
		if il.Status.Timestamp != nil {
			return true
		}
		var jobs eraserv1.ImageJobList
		if err := c.env.Client.List(ctx, &jobs); err != nil {
			return false
		}
		for i := range jobs.Items {
			if metav1.IsControlledBy(&jobs.Items[i], il) {
				return true
			}
		}
		return false
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
