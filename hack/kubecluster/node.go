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

	"github.com/eraser-oss/eraser/internal/containerdconfig"
	"github.com/eraser-oss/eraser/internal/testcontainerd"
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

// nodeBinds maps each private directory of a node (relative to its
// directory) to where it is mounted in the node's namespace.
//
// Eraser's workers keep each node's history in a hostPath at
// /var/lib/eraser: private, so that two nodes never share one state file
// and the tier never writes the machine's own /var/lib/eraser. The
// containerd root is seen at /var/lib/containerd, where it lies on a real
// node, so that manager.retention.imageFsPath keeps its default and one
// configuration measures every node's own image filesystem.
var nodeBinds = []struct{ src, dst string }{
	{"run", nodeRuntimeDir},
	{"kubelet", "/var/lib/kubelet"},
	{"pod-logs", "/var/log/pods"},
	{"container-logs", "/var/log/containers"},
	{"eraser", "/var/lib/eraser"},
	{"containerd/root", "/var/lib/containerd"},
}

type node struct {
	name   string
	index  int
	dir    string
	bridge string
	subnet string
	port   int
}

func (n node) hostSocket() string { return filepath.Join(n.dir, "run", "containerd.sock") }

// imageFs is the node's containerd root (its image filesystem) as the host
// reaches it.
func (n node) imageFs() string { return filepath.Join(n.dir, "containerd", "root") }

// mountImageFs puts the node's containerd root on a tmpfs of sizeMiB, so
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

// writeConfigs writes the node's containerd configuration (everything under
// the node's directory except the socket), its CNI bridge and its kubelet
// configuration.
func (n node) writeConfigs(caFile string, plainHTTPRegistries []string) error {
	for _, d := range []string{"run", "kubelet", "pod-logs", "container-logs", "eraser", "cni/conf", "cni/ipam", "containerd/root"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	ctrd := containerdconfig.TOML(containerdconfig.Options{
		Dir: filepath.Join(n.dir, "containerd"), Socket: nodeSocket, SandboxImage: sandboxImage,
		CNIBinDir: "/usr/lib/cni", CNIConfDir: filepath.Join(n.dir, "cni", "conf"),
		PlainHTTPRegistries: plainHTTPRegistries,
	})
	if err := os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(ctrd), 0o644); err != nil {
		return err
	}
	// Written before containerd starts: containerd 1.6 does not notice a
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
cgroupsPerQOS: false
enforceNodeAllocatable: []
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
`, nodeSocket, n.port, caFile)
	return os.WriteFile(filepath.Join(n.dir, "kubelet.yaml"), []byte(kubelet), 0o644)
}

// nodeMain runs in the node's new mount namespace: it mounts the node's
// private directories, runs containerd (with the sandbox image imported) and
// the kubelet, and on SIGTERM stops them, removing every pod first.
func nodeMain(args []string) error {
	fs := flag.NewFlagSet(nodeCommand, flag.ExitOnError)
	name := fs.String("name", "", "node name")
	dir := fs.String("dir", "", "node directory")
	kubelet := fs.String("kubelet", "", "kubelet binary")
	kubeconfig := fs.String("kubeconfig", "", "kubelet kubeconfig")
	pause := fs.String("pause", "", "sandbox image archive")
	logs := fs.String("logs", "", "log directory")
	_ = fs.Parse(args)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	for _, b := range nodeBinds {
		if err := syscall.Mount(filepath.Join(*dir, b.src), b.dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("%s: bind-mounting %s on %s: %w", *name, b.src, b.dst, err)
		}
	}
	ctrd, err := startChild(*logs, *name+"-containerd", "containerd", "--config", filepath.Join(*dir, "containerd.toml"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(nodeSocket); err == nil {
			break
		}
		if time.Now().After(deadline) || !ctrd.running() {
			stopNode(*name, nil, ctrd)
			return fmt.Errorf("%s: containerd did not start (log: %s)", *name, filepath.Join(*logs, *name+"-containerd.log"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out, err := exec.Command("ctr", "--address", nodeSocket, "--namespace", "k8s.io", "images", "import", *pause).CombinedOutput(); err != nil {
		stopNode(*name, nil, ctrd)
		return fmt.Errorf("%s: importing the sandbox image: %w: %s", *name, err, out)
	}
	kl, err := startChild(*logs, *name+"-kubelet", *kubelet, "--config", filepath.Join(*dir, "kubelet.yaml"),
		"--kubeconfig", *kubeconfig, "--hostname-override", *name, "--v=1")
	if err != nil {
		stopNode(*name, nil, ctrd)
		return err
	}
	var failed error
	select {
	case <-sig:
	case <-kl.exited:
		failed = fmt.Errorf("%s: kubelet exited: %v (log: %s)", *name, kl.err, filepath.Join(*logs, *name+"-kubelet.log"))
	case <-ctrd.exited:
		failed = fmt.Errorf("%s: containerd exited: %v", *name, ctrd.err)
	}
	stopNode(*name, kl, ctrd)
	return failed
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

// stopNode stops the kubelet, then removes every pod sandbox through CRI
// (which stops the containers and releases their network and mounts), then
// stops containerd and whatever it left in this namespace.
func stopNode(name string, kubelet, ctrd *proc) {
	stopChild(kubelet, 20*time.Second)
	if ctrd != nil && ctrd.running() {
		if err := removeSandboxes(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: removing pods: %v\n", name, err)
		}
	}
	stopChild(ctrd, 15*time.Second)
	if ns, err := mountNamespace(os.Getpid()); err == nil {
		killStragglers(ns, "")
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

func removeSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+nodeSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
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

// seed imports images made of the pause binary and some random bytes into a
// node's runtime: stand-ins for the images a real node accumulates.
func seed(state, nodeName string, size int, tags []string) error {
	pause, err := os.ReadFile(filepath.Join(state, "pause"))
	if err != nil {
		return fmt.Errorf("is the cluster in %s running? %w", state, err)
	}
	socket := node{dir: filepath.Join(state, nodeName)}.hostSocket()
	if _, err := os.Stat(socket); err != nil {
		return fmt.Errorf("no node %s: %w", nodeName, err)
	}
	var imgs []testcontainerd.Image
	for _, t := range tags {
		imgs = append(imgs, testcontainerd.Image{Tags: []string{t}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: size})
	}
	f, err := os.CreateTemp(state, "seed-*.tar")
	if err != nil {
		return err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	if err := testcontainerd.WriteArchive(f.Name(), imgs); err != nil {
		return err
	}
	if out, err := exec.Command("ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", f.Name()).CombinedOutput(); err != nil {
		return fmt.Errorf("importing into %s: %w: %s", nodeName, err, out)
	}
	return nil
}
