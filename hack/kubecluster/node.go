//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/containerdconfig"
)

// nodeCommand is the hidden subcommand that runs one node inside its own
// mount namespace.
const nodeCommand = "__node"

// Paths as every node sees them in its mount namespace. The containerd
// socket is upstream Eraser's default runtime address; the kubelet paths are
// the kubelet's defaults, some of which (device plugins, /var/log/containers)
// it cannot be told to put elsewhere and two kubelets must not share.
const (
	nodeRuntimeDir = "/run/containerd"
	nodeSocket     = nodeRuntimeDir + "/containerd.sock"
	sandboxImage   = "registry.k8s.io/pause:3.10"
)

// bind is a private directory of a node (relative to its directory) and
// where it is mounted in the node's namespace.
type bind struct{ src, dst string }

// kubeletBind is every node's; it tells the node's mount namespace apart.
var kubeletBind = bind{"kubelet", "/var/lib/kubelet"}

// commonBinds are every node's, whatever its runtime.
//
// Eraser's workers keep each node's history in a hostPath at
// /var/lib/eraser: private, so that two nodes never share one state file
// and the tier never writes the machine's own /var/lib/eraser.
var commonBinds = []bind{
	kubeletBind,
	{"pod-logs", "/var/log/pods"},
	{"container-logs", "/var/log/containers"},
	{"eraser", "/var/lib/eraser"},
}

// containerdBinds are a containerd node's. The containerd root is seen at
// /var/lib/containerd, where it lies on a real node, so that
// manager.retention.imageFsPath keeps its default and one configuration
// measures every node's own image filesystem.
var containerdBinds = []bind{
	{"run", nodeRuntimeDir},
	{"containerd/root", "/var/lib/containerd"},
}

func bindSources(n node) []string {
	var out []string
	for _, b := range n.binds() {
		out = append(out, filepath.Join(n.dir, b.src))
	}
	return out
}

// binds are the node's private mounts.
func (n node) binds() []bind {
	if n.runtime == runtimeCRIO {
		return append(append([]bind{}, commonBinds...), crioBinds...)
	}
	return append(append([]bind{}, commonBinds...), containerdBinds...)
}

type node struct {
	name   string
	index  int
	dir    string
	bridge string
	subnet string
	port   int
	// runtime is runtimeContainerd or runtimeCRIO.
	runtime string
}

// hostSocket is the node's runtime socket as the host reaches it.
func (n node) hostSocket() string {
	if n.runtime == runtimeCRIO {
		return filepath.Join(n.dir, "crio", "run", "crio.sock")
	}
	return filepath.Join(n.dir, "run", "containerd.sock")
}

// socket is the same socket as the node's processes see it.
func (n node) socket() string {
	if n.runtime == runtimeCRIO {
		return crioSocket
	}
	return nodeSocket
}

// imageFs is the node's runtime root (its image filesystem) as the host
// reaches it.
func (n node) imageFs() string {
	if n.runtime == runtimeCRIO {
		return filepath.Join(n.dir, "crio", "containers", "storage")
	}
	return filepath.Join(n.dir, "containerd", "root")
}

// mountImageFs puts the node's runtime root on a tmpfs of sizeMiB, so
// that tests can fill the image filesystem to their thresholds without
// touching the machine's disk. Mounted in the host's namespace before the
// node starts, so the node's namespace inherits it and the teardown's
// unmount of everything under the state directory removes it.
func (n node) mountImageFs(sizeMiB int) error {
	if err := syscall.Mount("tmpfs", n.imageFs(), "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0700", sizeMiB)); err != nil {
		return fmt.Errorf("mounting a %d MiB tmpfs on %s: %w", sizeMiB, n.imageFs(), err)
	}
	return nil
}

// writeConfigs writes the node's runtime configuration (everything under
// the node's directory except the socket), its CNI bridge and its kubelet
// configuration.
func (n node) writeConfigs(caFile string, plainHTTPRegistries []string, c crioSetup) error {
	for _, d := range []string{"kubelet", "pod-logs", "container-logs", "eraser", "cni/conf", "cni/ipam"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range append([]string{n.imageFs()}, bindSources(n)...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// The kubelet's cgroup settings: see crioKubeletCgroups.
	cgroups := "cgroupsPerQOS: false\n"
	if n.runtime == runtimeCRIO {
		var err error
		if cgroups, err = n.writeCRIOConfig(plainHTTPRegistries, c); err != nil {
			return err
		}
	} else {
		ctrd := containerdconfig.TOML(containerdconfig.Options{
			Dir: filepath.Join(n.dir, "containerd"), Socket: nodeSocket, SandboxImage: sandboxImage,
			CNIBinDir: "/usr/lib/cni", CNIConfDir: filepath.Join(n.dir, "cni", "conf"),
			PlainHTTPRegistries: plainHTTPRegistries,
		})
		if err := os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(ctrd), 0o644); err != nil {
			return err
		}
	}
	// Written before the runtime starts: containerd 1.6 does not notice a
	// conflist moved into place later. Without isDefaultGateway pods cannot
	// reach the kubernetes Service address on the host.
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "%[1]s",
  "plugins": [
    {"type": "bridge", "bridge": "%[1]s", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "%[2]s"}]], "dataDir": "%[3]s/cni/ipam"}}
  ]
}
`, n.bridge, n.subnet, n.dir)
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "conf", "10-"+n.bridge+".conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
# Since 1.35 the kubelet refuses cgroup v1 unless told; harmless on v2.
failCgroupV1: false
# containerd 1.6 cannot tell the kubelet its cgroup driver.
cgroupDriver: cgroupfs
%[4]senforceNodeAllocatable: []
failSwapOn: false
makeIPTablesUtilChains: false
staticPodPath: ""
address: 0.0.0.0
port: %[2]d
readOnlyPort: 0
healthzPort: 0
# Only the API server (its client certificate is from the cluster's CA)
# may use the kubelet's API.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[3]s}
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
mergeDefaultEvictionSettings: false
# 100 turns image garbage collection off: the images on the nodes are the
# tests' to manage, and Eraser's to remove.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 5s
resolvConf: /etc/resolv.conf
`, n.socket(), n.port, caFile, cgroups)
	return os.WriteFile(filepath.Join(n.dir, "kubelet.yaml"), []byte(kubelet), 0o644)
}

// nodeMain runs in the node's new mount namespace: it mounts the node's
// private directories, runs its runtime (with the sandbox image on it) and
// the kubelet, and on SIGTERM stops them, removing every pod first.
func nodeMain(args []string) error {
	fs := flag.NewFlagSet(nodeCommand, flag.ExitOnError)
	n := node{}
	fs.StringVar(&n.name, "name", "", "node name")
	fs.StringVar(&n.dir, "dir", "", "node directory")
	fs.StringVar(&n.runtime, "runtime", runtimeContainerd, "containerd or crio")
	kubelet := fs.String("kubelet", "", "kubelet binary")
	kubeconfig := fs.String("kubeconfig", "", "kubelet kubeconfig")
	pause := fs.String("pause", "", "sandbox image archive (containerd)")
	crioBin := fs.String("crio-bin", "", "directory of crio and pinns (CRI-O)")
	logs := fs.String("logs", "", "log directory")
	_ = fs.Parse(args)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	// Recursive: a CRI-O node's image store (a tmpfs with -imagefs-size)
	// is mounted inside the directory it binds on /var/lib/containers.
	for _, b := range n.binds() {
		if err := syscall.Mount(filepath.Join(n.dir, b.src), b.dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("%s: bind-mounting %s on %s: %w", n.name, b.src, b.dst, err)
		}
	}
	var rt *proc
	var err error
	if n.runtime == runtimeCRIO {
		rt, err = n.startCRIO(*logs, *crioBin)
	} else {
		rt, err = n.startContainerd(*logs, *pause)
	}
	if err != nil {
		return err
	}
	kl, err := startChild(*logs, n.name+"-kubelet", *kubelet, "--config", filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig", *kubeconfig, "--hostname-override", n.name, "--node-labels", runtimeLabel+"="+n.runtime, "--v=1")
	if err != nil {
		n.stop(nil, rt)
		return err
	}
	var failed error
	select {
	case <-sig:
	case <-kl.exited:
		failed = fmt.Errorf("%s: kubelet exited: %v (log: %s)", n.name, kl.err, filepath.Join(*logs, n.name+"-kubelet.log"))
	case <-rt.exited:
		failed = fmt.Errorf("%s: %s exited: %v", n.name, n.runtime, rt.err)
	}
	n.stop(kl, rt)
	return failed
}

// startContainerd runs containerd and imports the sandbox image.
func (n node) startContainerd(logs, pause string) (*proc, error) {
	ctrd, err := startChild(logs, n.name+"-containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml"))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(nodeSocket); err == nil {
			break
		}
		if time.Now().After(deadline) || !ctrd.running() {
			n.stop(nil, ctrd)
			return nil, fmt.Errorf("%s: containerd did not start (log: %s)", n.name, filepath.Join(logs, n.name+"-containerd.log"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("ctr", "--address", nodeSocket, "--namespace", "k8s.io", "images", "import", pause).CombinedOutput(); err != nil {
		n.stop(nil, ctrd)
		return nil, fmt.Errorf("%s: importing the sandbox image: %w: %s", n.name, err, out)
	}
	return ctrd, nil
}

// startChild runs a node process; it dies with the node runner.
func startChild(logs, name, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); _ = logf.Close(); close(p.exited) }()
	return p, nil
}

// stop stops the kubelet, then removes every pod sandbox through CRI
// (which stops the containers and releases their network and mounts), then
// stops the runtime and whatever it left in this namespace (containerd's
// shims, CRI-O's conmons).
func (n node) stop(kubelet, rt *proc) {
	stopChild(kubelet, 20*time.Second)
	if rt != nil && rt.running() {
		if err := removeSandboxes(n.socket()); err != nil {
			fmt.Fprintf(os.Stderr, "%s: removing pods: %v\n", n.name, err)
		}
	}
	stopChild(rt, 15*time.Second)
	if ns, err := mountNamespace(os.Getpid()); err == nil {
		killStragglers(ns, n.dir, "")
	}
}

func stopChild(p *proc, grace time.Duration) {
	if p == nil || !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func removeSandboxes(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	pods, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.GetItems() {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s: %w", p.GetMetadata().GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p.GetMetadata().GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// nodeNames lists node names from pid files.
func nodeNames(state string) []string {
	files, _ := filepath.Glob(filepath.Join(state, "pids", "node-*.pid"))
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	return out
}
