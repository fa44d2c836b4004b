// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// Eraser CRDs installed, once per test package and only when a test asks for
// it (Require): a run of the package's pure tests starts nothing.
//
// The binaries come from hack/build-control-plane.sh: KUBEBUILDER_ASSETS when
// set (make test sets it), else the script's cache directory. Without them
// the tests asking for the control plane are skipped with a message, except
// under CI, where a missing control plane is a failure: a tier that silently
// does not run is worse than a red build. Under go test -short (the unit
// tier) they skip, naming the tier that runs them.
package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	erasescheme "github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
	// KubeconfigPath is an admin kubeconfig for processes the tests start.
	KubeconfigPath string
	// certDir is the kube-apiserver's certificate directory when testenv
	// owns it (WithRestartableAPIServer), removed by Stop.
	certDir string
	// kcm is the kube-controller-manager of WithGarbageCollector;
	// kcmMissing why there is none when it was asked for (outside CI).
	kcm        *controllerManager
	kcmMissing string
}

// shared is the package's one control plane: Run records how to start it,
// the first Require starts it, and Run stops it after the tests.
var shared struct {
	once sync.Once
	// ran is set by Run: without it no one would stop the control plane.
	ran  bool
	opts []Option
	tier string
	dst  **Env
	env  *Env
	err  error
}

// Run runs the package's tests and stops the control plane if one of them
// started it (Require); *env is set when it starts. Use it as the body of
// TestMain.
func Run(m *testing.M, env **Env, opts ...Option) int {
	shared.ran, shared.dst, shared.opts, shared.tier = true, env, opts, apply(opts).tier
	code := m.Run()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping control plane:", err)
		}
	}
	return code
}

// Require returns the package's control plane, starting it on the first
// call. Under -short the test skips, naming its tier (Tier). A control
// plane that cannot start skips the test, except under CI, where it fails.
func Require(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s tier: run make test-%s", shared.tier, shared.tier)
	}
	if !shared.ran {
		t.Fatal("testenv: the package's TestMain must be testenv.Run")
	}
	shared.once.Do(func() {
		shared.env, shared.err = start(shared.opts...)
		if shared.err == nil {
			*shared.dst = shared.env
		}
	})
	if shared.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no control plane: %v", shared.err)
		}
		t.Skipf("no control plane: %v; run `make test-%s`, which builds it", shared.err, shared.tier)
	}
	return shared.env
}

func assetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	// Ask the build script where its cache is, without building.
	out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, filepath.Join(repo.Root(), "hack", "build-control-plane.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("KUBEBUILDER_ASSETS is unset and the cached control plane is not built")
	}
	return strings.TrimSpace(string(out)), nil
}

// Kubectl is the kubectl that hack/build-control-plane.sh built with the
// control plane, for tests of what a user sees through it. Without it the
// test is skipped, except under CI, where that is a failure.
func Kubectl(t testing.TB) string {
	t.Helper()
	dir, err := assetsDir()
	if err == nil {
		bin := filepath.Join(dir, "kubectl")
		if _, err = os.Stat(bin); err == nil {
			return bin
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no kubectl: %v; hack/build-control-plane.sh builds it", err)
	}
	t.Skipf("no kubectl: %v; run `make test`, which builds it", err)
	return ""
}

// Start starts a control plane outside TestMain (benchmarks); Stop it.
func Start(opts ...Option) (*Env, error) { return start(opts...) }

// Option changes the control plane before it starts.
type Option func(*settings)

// settings are what the options set: the control plane envtest starts and
// the controllers to run beside it.
type settings struct {
	te          *envtest.Environment
	controllers []string
	restartable bool
	// tier names the make target (test-<tier>) that runs the package's
	// control-plane tests, for the message of a test skipped under -short.
	tier string
}

// apply is the settings the options make, on a control plane not started
// (no option has an effect outside settings).
func apply(opts []Option) *settings {
	set := &settings{te: &envtest.Environment{}, tier: "control-plane"}
	for _, o := range opts {
		o(set)
	}
	return set
}

// Tier names the tier (make test-<name>) whose tests are the package's
// control-plane tests, when it is not the control-plane tier.
func Tier(name string) Option {
	return func(s *settings) { s.tier = name }
}

// WithAPIServerFlag appends a kube-apiserver flag, for tests of behaviour
// that only some clusters enable (an admission plugin, say).
func WithAPIServerFlag(name, value string) Option {
	return func(s *settings) {
		s.te.ControlPlane.GetAPIServer().Configure().Append(name, value)
	}
}

// WithoutCRDs starts the control plane with no CRDs, for the tiers that
// install them as users do (helm install, kubectl apply) and test their life
// cycle: created, upgraded, kept or removed.
func WithoutCRDs() Option {
	return func(s *settings) {
		s.te.CRDDirectoryPaths = nil
		s.te.ErrorIfCRDPathMissing = false
	}
}

// restartableCertDir prefixes the certificate directories that
// WithRestartableAPIServer makes start create.
const restartableCertDir = "eraser-testenv-apiserver-"

// WithRestartableAPIServer lets StopAPIServer and StartAPIServer stop and
// start the kube-apiserver while etcd keeps running. envtest removes a
// certificate directory it created when the API server stops, and a restart
// would then serve a new CA; in a directory of testenv's own the serving
// certificates survive, and with them every kubeconfig written before.
func WithRestartableAPIServer() Option {
	return func(s *settings) { s.restartable = true }
}

// StopAPIServer stops the kube-apiserver (SIGTERM, as a rolling restart
// does); etcd keeps running. Only with WithRestartableAPIServer.
//
// kube-controller-manager (WithGarbageCollector) is stopped first: its
// watches keep a stopping API server draining past envtest's stop timeout.
// StartAPIServer starts it again.
func (e *Env) StopAPIServer() error {
	if e.certDir == "" {
		return fmt.Errorf("testenv: the API server is restartable only with WithRestartableAPIServer")
	}
	if e.kcm != nil {
		e.kcm.Stop()
	}
	return e.env.ControlPlane.APIServer.Stop()
}

// StartAPIServer starts the kube-apiserver stopped by StopAPIServer again,
// on the same address, port and certificates, and waits until it is
// healthy.
func (e *Env) StartAPIServer() error {
	if e.certDir == "" {
		return fmt.Errorf("testenv: the API server is restartable only with WithRestartableAPIServer")
	}
	api := e.env.ControlPlane.APIServer
	before := api.SecureServing.Port
	if err := api.Start(); err != nil {
		return err
	}
	if after := api.SecureServing.Port; after != before {
		return fmt.Errorf("testenv: the API server came back on port %s, not %s", after, before)
	}
	if e.kcm != nil {
		e.kcm = e.kcm.restart()
		if err := waitCollecting(context.Background(), e.Client, 2*time.Minute); err != nil {
			return fmt.Errorf("kube-controller-manager after the API server's restart: %w", err)
		}
	}
	return nil
}

// Stop stops the control plane, kube-controller-manager first.
func (e *Env) Stop() error {
	if e.kcm != nil {
		e.kcm.Stop()
	}
	_ = os.Remove(e.KubeconfigPath)
	err := e.env.Stop()
	if e.certDir != "" {
		_ = os.RemoveAll(e.certDir)
	}
	return err
}

func start(opts ...Option) (*Env, error) {
	dir, err := assetsDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s", dir)
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join(repo.Root(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	set := &settings{te: te}
	for _, o := range opts {
		o(set)
	}
	var certDir string
	if set.restartable {
		if certDir, err = os.MkdirTemp("", restartableCertDir); err != nil {
			return nil, fmt.Errorf("testenv: certificate directory: %w", err)
		}
		te.ControlPlane.GetAPIServer().CertDir = certDir
	}
	cfg, err := te.Start()
	if err != nil {
		if certDir != "" {
			_ = os.RemoveAll(certDir)
		}
		return nil, fmt.Errorf("starting control plane from %s: %w", dir, err)
	}
	e := &Env{Config: cfg, env: te, certDir: certDir}
	scheme, err := erasescheme.New()
	if err == nil {
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err == nil {
		e.Client, err = client.New(cfg, client.Options{Scheme: scheme})
	}
	if err == nil {
		err = e.writeKubeconfig()
	}
	if err == nil && len(set.controllers) > 0 {
		err = e.startControllers(dir, set.controllers)
	}
	if err != nil {
		if e.kcm != nil {
			e.kcm.Stop()
		}
		_ = te.Stop()
		if certDir != "" {
			_ = os.RemoveAll(certDir)
		}
		return nil, err
	}
	return e, nil
}

// startControllers runs kube-controller-manager with the controllers and
// waits until its garbage collector collects. A missing binary is an error
// under CI; elsewhere the control plane goes on without it, and the tests
// that need it skip (RequireGarbageCollector).
func (e *Env) startControllers(dir string, controllers []string) error {
	kcm, err := startControllerManager(dir, e.KubeconfigPath, controllers, &Buffer{})
	if err != nil {
		if os.Getenv("CI") != "" {
			return err
		}
		e.kcmMissing = err.Error()
		fmt.Fprintf(os.Stderr, "testenv: %v; the tests needing the garbage collector skip\n", err)
		return nil
	}
	e.kcm = kcm
	if err := waitCollecting(context.Background(), e.Client, 2*time.Minute); err != nil {
		return fmt.Errorf("kube-controller-manager: %w; its log:\n%s", err, kcm.log.Tail(40))
	}
	return nil
}

func (e *Env) writeKubeconfig() error {
	user, err := e.env.AddUser(envtest.User{Name: "eraser-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding admin user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "eraser-kubeconfig-*")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(kc); err != nil {
		return err
	}
	e.KubeconfigPath = f.Name()
	return nil
}

// FreePort returns a loopback address with a port free now, for a process
// the test starts to listen on.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitFor polls cond until it holds, failing the test after timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.For(t, timeout, what, cond)
}
