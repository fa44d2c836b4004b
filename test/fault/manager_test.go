package fault_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/eraser-oss/eraser/internal/testing/testenv"
	wireconfig "github.com/eraser-oss/eraser/internal/wire/config"
)

// process is a running manager.
type process struct {
	cmd  *exec.Cmd
	log  *testenv.Buffer // stderr
	done chan error
}

// lines returns the log lines with every part.
func (p *process) lines(parts ...string) []string {
	var out []string
	for _, l := range strings.Split(p.log.String(), "\n") {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(l, part)
		}
		if all && l != "" {
			out = append(out, l)
		}
	}
	return out
}

func (p *process) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// startManager runs the manager binary in the scenario's namespace with the
// EraserConfig doc, as the Deployment does (leader election on); extra
// flags come last, so that they override the defaults here.
func (s *scenario) startManager(doc string, extra ...string) *process {
	s.t.Helper()
	return s.startManagerEnv(doc, nil, extra...)
}

// startManagerEnv is startManager with more environment (VAR=value), as
// the Deployment's downward API gives it.
func (s *scenario) startManagerEnv(doc string, environ []string, extra ...string) *process {
	s.t.Helper()
	t := s.t
	cfg := filepath.Join(t.TempDir(), wireconfig.ConfigKey)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + env.KubeconfigPath, "--config=" + cfg,
		"--health-probe-bind-address=" + testenv.FreePort(t), "--metrics-bind-address=0", "--log-level=debug"}, extra...)
	cmd := exec.Command(managerBin.Path(t), args...)
	cmd.Env = append(append(os.Environ(), "POD_NAMESPACE="+s.ns), environ...)
	p := &process{cmd: cmd, log: &testenv.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		if t.Failed() {
			t.Logf("manager (pid %d) log, last 150 lines:\n%s", cmd.Process.Pid, tail(p.log.String(), 150))
		}
	})
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
