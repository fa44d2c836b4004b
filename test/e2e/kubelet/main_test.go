//go:build linux

// Package kubelet is the end-to-end tier on real kubelets: a local cluster
// (hack/kubecluster: real API server, controller manager, scheduler, and
// nodes that are real kubelets on their own containerd), the released images
// (make images) imported into every node, Eraser installed from
// deploy/eraser.yaml and from the Helm chart with the manager running
// in-cluster, and the effects checked on each node's runtime through CRI
// from the host.
//
// It starts a cluster and changes the machine for the while (see
// hack/kubecluster), so it runs only when asked: ERASER_E2E_KUBELET=1, as
// make test-e2e-kubelet (a step of make test, so of CI) sets it; a plain
// go test ./... skips its tests with a message. It needs root.
package kubelet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/scheme"
)

// stateDir is fixed so that logs kept after a failure are easy to find; the
// cluster takes a lock on it, so two runs never share it.
const stateDir = "/tmp/eraser-e2e-kubelet"

// images are the released images the tier installs, as make images names
// their docker-archive tarballs in bin/images.
var images = []string{"manager", "collector", "remover", "trivy-scanner"}

// Node is one node of the running cluster, as hack/kubecluster describes it.
type Node struct {
	Name string `json:"name"`
	// Socket is the node's containerd socket, reached from the host.
	Socket string `json:"socket"`
	// RuntimeAddress is the same socket as the node's pods see it.
	RuntimeAddress string `json:"runtimeAddress"`
}

type clusterInfo struct {
	Kubeconfig string `json:"kubeconfig"`
	Nodes      []Node `json:"nodes"`
}

var (
	skipReason string
	cluster    clusterInfo
	kube       client.Client
	clientset  kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("ERASER_E2E_KUBELET") != "1" {
		skipReason = "the kubelet tier runs a local cluster as root; run it with make test-e2e-kubelet (part of make test), or ERASER_E2E_KUBELET=1"
		return m.Run()
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "kubelet e2e: needs root (mount namespaces, bridges, containerd)")
		return 1
	}
	tmp, err := os.MkdirTemp("", "eraser-e2e-kubelet-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	stop, err := startCluster(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e:", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		// The teardown keeps the components' logs when this file exists.
		_ = os.WriteFile(filepath.Join(stateDir, "keep-logs"), nil, 0o644)
		fmt.Fprintf(os.Stderr, "kubelet e2e: logs of every component kept in %s/logs\n", stateDir)
	}
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e: stopping the cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// requireCluster skips the test when the tier was not asked for.
func requireCluster(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kubelet e2e: "+format+"\n", args...)
}

// startCluster builds what is missing (each step is cached), starts the
// cluster, imports the images into every node and returns how to stop it.
func startCluster(tmp string) (func() error, error) {
	root := repoRoot()
	t0 := time.Now()
	if out, err := command(root, "hack/install-test-deps.sh").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("installing containerd, runc and CNI plugins: %w: %s", err, out)
	}
	build := command(root, "hack/build-control-plane.sh")
	build.Env = append(build.Env, "KUBELET=1", "EXTRA=1")
	build.Stderr = os.Stderr
	out, err := build.Output()
	if err != nil {
		return nil, fmt.Errorf("building the control plane and kubelet: %w", err)
	}
	assets := strings.TrimSpace(string(out))
	// Always rebuilt, so that the tier never tests stale images; the Go
	// build cache makes this cheap when nothing changed.
	progress("building images %v (make images)", images)
	mk := command(root, "make", "--no-print-directory", "images", "IMAGES="+strings.Join(images, " "), "PLATFORMS=linux/amd64")
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	if err := mk.Run(); err != nil {
		return nil, fmt.Errorf("make images: %w", err)
	}
	bin := filepath.Join(tmp, "kubecluster")
	if out, err := command(root, "go", "build", "-o", bin, "./hack/kubecluster").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building hack/kubecluster: %w: %s", err, out)
	}
	progress("binaries ready in %.0fs", time.Since(t0).Seconds())

	t1 := time.Now()
	cmd := command(root, bin, "up", "-state", stateDir, "-nodes", strconv.Itoa(nodeCount()), "-assets", assets,
		"-pause-source", filepath.Join(root, "test", "images", "pause"))
	// The cluster tears itself down if this process dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if path, ok := strings.CutPrefix(sc.Text(), "cluster ready: "); ok {
				ready <- path
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(5 * time.Minute):
			_ = cmd.Process.Kill()
			return fmt.Errorf("the cluster did not stop in 5m; run: %s down -state %s", bin, stateDir)
		}
	}
	var infoPath string
	select {
	case infoPath = <-ready:
	case err := <-exited:
		return nil, fmt.Errorf("the cluster did not start: %v", err)
	case <-time.After(5 * time.Minute):
		return nil, errors.Join(fmt.Errorf("the cluster was not ready after 5m"), stop())
	}
	progress("cluster up in %.1fs", time.Since(t1).Seconds())
	if err := loadCluster(infoPath); err != nil {
		return nil, errors.Join(err, stop())
	}
	t2 := time.Now()
	for _, n := range cluster.Nodes {
		for _, img := range images {
			if out, err := exec.Command("ctr", "--address", n.Socket, "--namespace", "k8s.io", "images", "import", imageTarball(img)).CombinedOutput(); err != nil {
				return nil, errors.Join(fmt.Errorf("importing %s into %s: %w: %s", img, n.Name, err, out), stop())
			}
		}
	}
	progress("images %v imported into %d node(s) in %.1fs", images, len(cluster.Nodes), time.Since(t2).Seconds())
	return stop, nil
}

func loadCluster(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &cluster); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		return err
	}
	s, err := scheme.New()
	if err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	if kube, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

// nodeCount is 2 when the machine has the memory for it (a node is about
// 170 MB, the control plane about 500 MB), else 1; ERASER_E2E_NODES
// overrides it.
func nodeCount() int {
	if n, err := strconv.Atoi(os.Getenv("ERASER_E2E_NODES")); err == nil && n > 0 {
		return n
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "MemAvailable:" {
			if kb, err := strconv.Atoi(f[1]); err == nil && kb > 3<<20 {
				return 2
			}
		}
	}
	return 1
}

func imageTarball(name string) string {
	return filepath.Join(repoRoot(), "bin", "images", name+"_linux_amd64.tar")
}

func command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	return cmd
}

// testCtx ends with the test.
func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c
}
