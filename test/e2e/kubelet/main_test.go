//go:build linux

// Package kubelet is the end-to-end tier on real kubelets: a local cluster
// (hack/kubecluster: real API server, controller manager, scheduler, and
// nodes that are real kubelets on their own containerd), Eraser installed
// as a user installs it: released (make release) into a registry on
// loopback (go-containerregistry's pkg/registry, served by this process),
// which the nodes' containerd pull its images from over plain HTTP, then
// installed from the chart in that registry (helm install oci://...) and
// from deploy/eraser.yaml rendered for it, with the manager running
// in-cluster; the effects are checked on each node's runtime through CRI
// from the host. Only the test images the tests remove are imported into
// the nodes.
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
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/api/scheme"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
	"github.com/eraser-oss/eraser/internal/wire/images"
)

// stateDir is fixed so that logs kept after a failure are easy to find; the
// cluster takes a lock on it, so two runs never share it.
const stateDir = "/tmp/eraser-e2e-kubelet"

// e2eVersion is the version the tier releases: the images' tag and the
// chart's version.
const e2eVersion = "0.0.0-e2e"

// registryPath is where the tier releases Eraser: REGISTRY of make release,
// 127.0.0.1:PORT/eraser, set when the registry is up.
var registryPath string

// releasedDigests are the digests make release pushed, by repository: the
// released chart pins its images to them, so nodes hold Eraser's images
// by digest.
var releasedDigests = map[string]string{}

// workDir holds the tier's client configuration while it runs.
var workDir string

// The commands the tier builds, each as released and by the first use: the
// local cluster, the kubectl plugin, the remover's delaying entrypoint
// (importDelayedRemover) and the scanner module's fixture DB registry.
var (
	kubecluster   = gobuild.New("hack/kubecluster")
	kubectlPlugin = gobuild.New("cmd/kubectl-eraser")
	delay         = gobuild.New("test/e2e/kubelet/testdata/delay").For("linux", "amd64")
	fixtureDB     = gobuild.InModule(gobuild.Scanner, "test/fixturedb")
)

// assetsDir holds the control plane's binaries, kubectl included.
var assetsDir string

// Node is one node of the running cluster, as hack/kubecluster describes it.
type Node struct {
	Name string `json:"name"`
	// Runtime is containerd or crio.
	Runtime string `json:"runtime"`
	// Socket is the node's runtime socket, reached from the host.
	Socket string `json:"socket"`
	// RuntimeAddress is the same socket as the node's pods see it.
	RuntimeAddress string `json:"runtimeAddress"`
	// Dir is the node's private directory; its pods' /var/lib/eraser is
	// Dir/eraser.
	Dir string `json:"dir"`
	// ImageFs is the node's runtime root (a tmpfs of imageFsMiB) as the
	// host reaches it; the node's pods see it at /var/lib/containerd
	// (CRI-O: /var/lib/containers/storage).
	ImageFs string `json:"imageFs"`
}

// imageFsMiB sizes each node's image filesystem: a tmpfs, so that the
// disk-pressure scenario crosses its thresholds with a few test images and
// never with the machine's disk. It holds Eraser's images (the scanner's
// the largest) and the test images with room to spare; tmpfs takes memory
// only for what is written.
const imageFsMiB = 1536

// clusterInfo is DIR/cluster.json. Nodes are the containerd nodes, which
// every test but TestCRIONode runs on; the CRI-O nodes are in crioNodes
// (crio_test.go).
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
	// testing.Short is known only once the flags are parsed.
	flag.Parse()
	if testing.Short() {
		skipReason = "kubelet tier: run make test-kubelet"
		return m.Run()
	}
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
	for _, c := range []*gobuild.Commands{kubecluster, kubectlPlugin, delay, fixtureDB} {
		defer c.Remove()
	}
	workDir = tmp
	before := snapshotHostPaths()
	stop, err := startCluster(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e:", err)
		if rerr := restoreHostPaths(before); rerr != nil {
			fmt.Fprintln(os.Stderr, "kubelet e2e:", rerr)
		}
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
	if err := restoreHostPaths(before); err != nil {
		fmt.Fprintln(os.Stderr, "kubelet e2e:", err)
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

func repoRoot() string { return repo.Root() }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kubelet e2e: "+format+"\n", args...)
}

// startCluster builds what is missing (each step is cached), starts the
// loopback registry and releases Eraser into it (make release), starts the
// cluster with its nodes pulling from that registry, and returns how to
// stop both.
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
	assetsDir = assets
	dir, err := kubecluster.Build()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "kubecluster")
	progress("binaries ready in %.0fs", time.Since(t0).Seconds())

	host, stopRegistry, err := testregistry.Listen()
	if err != nil {
		return nil, fmt.Errorf("starting the loopback registry: %w", err)
	}
	registryPath = host + "/eraser"
	// Always built (for this registry, whose port changes each run), so
	// that the tier never tests stale images; the Go build cache makes it
	// cheap when nothing changed. linux/amd64 only: what the nodes run.
	t1 := time.Now()
	progress("releasing %s into the registry at %s (make release)", e2eVersion, registryPath)
	mk := command(root, "make", "--no-print-directory", "release", "REGISTRY="+registryPath, "VERSION="+e2eVersion,
		"INSECURE=1", "PLATFORMS=linux/amd64")
	mk.Env = append(mk.Env, helmEnv(tmp)...)
	mk.Stdout, mk.Stderr = os.Stderr, os.Stderr
	if err := mk.Run(); err != nil {
		stopRegistry()
		return nil, fmt.Errorf("make release: %w", err)
	}
	progress("released in %.0fs", time.Since(t1).Seconds())
	for _, im := range images.All() {
		tag, err := name.NewTag(registryPath+"/"+im.Repo+":"+e2eVersion, name.Insecure)
		if err != nil {
			stopRegistry()
			return nil, err
		}
		desc, err := remote.Head(tag)
		if err != nil {
			stopRegistry()
			return nil, fmt.Errorf("the released %s: %w", tag, err)
		}
		releasedDigests[im.Repo] = desc.Digest.String()
	}

	t2 := time.Now()
	args := []string{"up", "-state", stateDir, "-nodes", strconv.Itoa(nodeCount()), "-assets", assets,
		"-imagefs-size", strconv.Itoa(imageFsMiB), "-pause-source", filepath.Join(root, "test", "images", "pause"), "-insecure-registry", host}
	// One CRI-O node more, for TestCRIONode, when CRI-O is built; without
	// it that test fails under CI and skips elsewhere.
	if dir, err := crioBinDir(); err != nil {
		crioMissing = err.Error()
	} else {
		args = append(args, "-crio-nodes", "1", "-crio-bin", dir)
	}
	cmd := command(root, bin, args...)
	// The cluster tears itself down if this process dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stopRegistry()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		stopRegistry()
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
		defer stopRegistry()
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
		stopRegistry()
		return nil, fmt.Errorf("the cluster did not start: %v", err)
	case <-time.After(5 * time.Minute):
		return nil, errors.Join(fmt.Errorf("the cluster was not ready after 5m"), stop())
	}
	progress("cluster up in %.1fs", time.Since(t2).Seconds())
	if err := loadCluster(infoPath); err != nil {
		return nil, errors.Join(err, stop())
	}
	if err := isolateCRIONodes(); err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}

// helmEnv keeps Helm's and Docker's client configuration (credentials,
// caches) of the machine out of the tier's release and chart pulls.
func helmEnv(tmp string) []string {
	return []string{
		"HELM_REGISTRY_CONFIG=" + filepath.Join(tmp, "helm", "registry.json"),
		"HELM_REPOSITORY_CACHE=" + filepath.Join(tmp, "helm", "cache"),
		"HELM_REPOSITORY_CONFIG=" + filepath.Join(tmp, "helm", "repositories.yaml"),
		"HELM_CONTENT_CACHE=" + filepath.Join(tmp, "helm", "content"),
		"DOCKER_CONFIG=" + filepath.Join(tmp, "docker"),
	}
}

func loadCluster(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &cluster); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	all := cluster.Nodes
	cluster.Nodes = nil
	for _, n := range all {
		if n.Runtime == "crio" {
			crioNodes = append(crioNodes, n)
		} else {
			cluster.Nodes = append(cluster.Nodes, n)
		}
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

// command runs a tool of the tree. A go command keeps the build
// configuration it inherits (make test's GOFLAGS and CGO_ENABLED), so that
// it links what the earlier tiers compiled instead of compiling the
// standard library and Kubernetes once more in a configuration of its own.
func command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false"))
	return cmd
}

// testCtx ends with the test.
func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return c
}
