// Package managertest runs the manager binary as a process against a test's
// API server, as its Deployment runs it, and plays the kubelet for the
// worker pods it creates: the tiers that test the manager as it ships
// (cmd/manager, test/fault, test/bench, hack/render's chart tier) share it.
package managertest

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testenv"
)

// Binary is the manager, built by the first test starting one. A test
// package's TestMain removes it at its end.
var Binary = gobuild.New("cmd/manager")

// logTail is how much of a manager's log a failed test shows.
const logTail = 200

// Process is a running manager.
type Process struct {
	Cmd *exec.Cmd
	// Log is what the manager writes (its log is on stderr), read while it
	// runs.
	Log  *testenv.Buffer
	done chan error
}

// Manager says where a manager runs.
type Manager struct {
	Kubeconfig string
	// Namespace is the manager's own namespace, given as the Deployment's
	// downward API gives it (POD_NAMESPACE): its ConfigMap, worker pods and
	// leader lease are there.
	Namespace string
	// Env is more environment (VAR=value).
	Env []string
	// Log, if set, gets the log too, as it is written.
	Log io.Writer
}

// Start runs the manager with the EraserConfig doc as the Deployment does
// (leader election on), its health probe on a free port, no metrics
// listener, logging at debug level; extra flags come last, so that they
// override these.
func (m Manager) Start(t testing.TB, doc string, extra ...string) *Process {
	t.Helper()
	args := append([]string{"--kubeconfig=" + m.Kubeconfig, "--config=" + WriteConfig(t, doc),
		"--health-probe-bind-address=" + testenv.FreePort(t), "--metrics-bind-address=0", "--log-level=debug"}, extra...)
	return m.Exec(t, args...)
}

// Exec runs the manager with exactly args. The test's end kills it; a
// failed test shows the end of its log.
func (m Manager) Exec(t testing.TB, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(Binary.Path(t), args...)
	cmd.Env = append(os.Environ(), m.Env...)
	if m.Namespace != "" {
		cmd.Env = append(cmd.Env, "POD_NAMESPACE="+m.Namespace)
	}
	p := &Process{Cmd: cmd, Log: &testenv.Buffer{}, done: make(chan error, 1)}
	var out io.Writer = p.Log
	if m.Log != nil {
		out = io.MultiWriter(p.Log, m.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("manager (pid %d) log, last %d lines:\n%s", cmd.Process.Pid, logTail, p.Log.Tail(logTail))
		}
	})
	return p
}

// WriteConfig writes the EraserConfig doc to a file of the test's and
// returns its path.
func WriteConfig(t testing.TB, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Stop kills the manager, if it still runs, and waits for its end.
func (p *Process) Stop() {
	_ = p.Cmd.Process.Kill()
	err := <-p.done
	p.done <- err
}

// Exited says whether the manager has ended.
func (p *Process) Exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// WaitExit waits for the manager to end and returns its exit code; it
// fails the test if the manager still runs after timeout. A manager that
// has ended gives its code whatever the timeout, 0 included.
func (p *Process) WaitExit(t testing.TB, timeout time.Duration) int {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-p.done:
	default:
		select {
		case err = <-p.done:
		case <-timer.C:
			t.Fatalf("manager still running after %v", timeout)
		}
	}
	p.done <- err
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// Lines returns the log lines holding every one of parts.
func (p *Process) Lines(parts ...string) []string {
	var out []string
	for l := range strings.Lines(p.Log.String()) {
		l = strings.TrimSuffix(l, "\n")
		all := l != ""
		for _, part := range parts {
			all = all && strings.Contains(l, part)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}
