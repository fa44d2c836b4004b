package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gcControllers are the kube-controller-manager controllers
// WithGarbageCollector runs: the garbage collector, so that owner references
// behave as in a cluster, and the namespace controller, so that a deleted
// namespace takes its objects with it instead of staying Terminating.
var gcControllers = []string{"garbagecollector", "namespace"}

// WithGarbageCollector runs kube-controller-manager beside the API server
// (its garbage collector and namespace controller), built by
// `EXTRA=1 hack/build-control-plane.sh` into the same directory. Without
// the binary the control plane starts without it, RequireGarbageCollector
// skips the tests that need it, and under CI the start fails instead.
func WithGarbageCollector() Option {
	return func(s *settings) { s.controllers = gcControllers }
}

// controllerManager is a kube-controller-manager kept running until stop:
// one that exits is started again.
type controllerManager struct {
	bin  string
	args []string
	// log outlives the process: a restart (StartAPIServer) writes on.
	log  *Buffer
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startControllerManager(dir, kubeconfig string, controllers []string, log *Buffer) (*controllerManager, error) {
	bin := filepath.Join(dir, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no kube-controller-manager in %s (EXTRA=1 hack/build-control-plane.sh builds it): %w", dir, err)
	}
	c := &controllerManager{
		bin: bin,
		// As hack/kubecluster runs it, minus what only the controllers
		// left out need (signing keys, the root CA).
		args: []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0",
			"--use-service-account-credentials=false", "--controllers=" + strings.Join(controllers, ",")},
		log:  log,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	go c.supervise()
	return c, nil
}

// restart is a new kube-controller-manager as c was, writing on its log.
func (c *controllerManager) restart() *controllerManager {
	n := &controllerManager{bin: c.bin, args: c.args, log: c.log, stop: make(chan struct{}), done: make(chan struct{})}
	go n.supervise()
	return n
}

// supervise runs the process, restarting it a second after each exit.
func (c *controllerManager) supervise() {
	defer close(c.done)
	for {
		cmd := exec.Command(c.bin, c.args...)
		cmd.Stdout, cmd.Stderr = c.log, c.log
		exited := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			exited <- err
		} else {
			go func() { exited <- cmd.Wait() }()
		}
		select {
		case <-c.stop:
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
				<-exited
			}
			return
		case err := <-exited:
			fmt.Fprintf(c.log, "testenv: kube-controller-manager exited (%v); starting it again\n", err)
		}
		select {
		case <-c.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

func (c *controllerManager) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// waitCollecting waits until the garbage collector deletes an object whose
// owner does not exist: only then has it discovered the resources and
// synced its informers, and a test relying on it may start.
func waitCollecting(ctx context.Context, c client.Client, timeout time.Duration) error {
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("testenv-gc-probe-%d", time.Now().UnixNano()),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "testenv-gone",
			UID: types.UID("0b0b0b0b-0000-4000-8000-000000000000"), Controller: ptr.To(true)}},
	}}
	if err := c.Create(ctx, orphan); err != nil {
		return fmt.Errorf("creating the garbage collector's probe: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = c.Delete(ctx, orphan)
			return fmt.Errorf("the garbage collector did not delete an orphaned ConfigMap within %v (last read: %v)", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// errNoController marks a control plane started without the
// kube-controller-manager it was asked for (outside CI only).
var errNoController = errors.New("no garbage collector")

// HasGarbageCollector says whether kube-controller-manager runs beside the
// API server.
func (e *Env) HasGarbageCollector() bool { return e != nil && e.kcm != nil }

// RequireGarbageCollector skips the test when the control plane runs no
// garbage collector (never in CI, where the start fails instead).
func (e *Env) RequireGarbageCollector(t testing.TB) {
	t.Helper()
	if e == nil {
		// The package's env before its first Require.
		e = Require(t)
	}
	if !e.HasGarbageCollector() {
		t.Skipf("%v: %s; run `make test`, which builds kube-controller-manager", errNoController, e.kcmMissing)
	}
}

// ControllerManagerLog is the last lines of kube-controller-manager's
// output so far, for a failing test to show.
func (e *Env) ControllerManagerLog(lines int) string {
	if e == nil || e.kcm == nil {
		return ""
	}
	return e.kcm.log.Tail(lines)
}
