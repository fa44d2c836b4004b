package fault_test

import (
	"github.com/eraser-oss/eraser/internal/testing/managertest"
)

// manager is a manager in the scenario's namespace.
func (s *scenario) manager() managertest.Manager {
	return managertest.Manager{Kubeconfig: env.KubeconfigPath, Namespace: s.ns}
}

// startManager runs the manager binary in the scenario's namespace with the
// EraserConfig doc, as the Deployment does (leader election on); extra
// flags come last, so that they override the defaults.
func (s *scenario) startManager(doc string, extra ...string) *managertest.Process {
	s.t.Helper()
	return s.manager().Start(s.t, doc, extra...)
}
