//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cluster's addresses. The Service range is what a kubeadm cluster
// uses; pods of node N get 10.244.N.0/24 on bridge erk-cniN.
const (
	serviceCIDR   = "10.96.0.0/24"
	serviceHost   = "10.96.0.1"
	serviceBridge = "erk-svc0"
	bridgePrefix  = "erk-cni"
)

// kubeletSysctls are the machine-wide settings a kubelet rewrites at start
// (protectKernelDefaults: false) and that outlive it.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

type options struct {
	state, assets, pauseSource string
	// nodes run containerd; crioNodes more run CRI-O (binaries in crioBin).
	nodes, crioNodes int
	crioBin          string
	keepLogs         bool
	// imageFsMiB, when set, puts each node's containerd root on a tmpfs
	// of this size.
	imageFsMiB int
	// insecureRegistries are registries on this machine (host:port) the
	// nodes pull from over plain HTTP.
	insecureRegistries []string
}

// Info is what DIR/cluster.json holds for the tests and the demo.
type Info struct {
	Kubeconfig string     `json:"kubeconfig"`
	Server     string     `json:"server"`
	PID        int        `json:"pid"`
	Nodes      []NodeInfo `json:"nodes"`
}

// NodeInfo describes one node.
type NodeInfo struct {
	Name string `json:"name"`
	// Runtime is containerd or crio.
	Runtime string `json:"runtime"`
	// Socket is the node's runtime socket as the host reaches it.
	Socket string `json:"socket"`
	// RuntimeAddress is the same socket as the node's pods see it.
	RuntimeAddress string `json:"runtimeAddress"`
	// Dir is the node's private directory: what it mounts on the paths of
	// nodeBinds lies there.
	Dir string `json:"dir"`
	// ImageFs is the node's runtime root as the host reaches it; its pods
	// see it at /var/lib/containerd (CRI-O: /var/lib/containers/storage).
	ImageFs string `json:"imageFs"`
}

type cluster struct {
	o      options
	pki    *pki
	server string
	procs  []*proc
}

func up(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (mount namespaces, bridges, containerd)")
	}
	if err := preflight(o); err != nil {
		return err
	}
	if err := os.MkdirAll(o.state, 0o755); err != nil {
		return err
	}
	lock, err := lockState(o.state)
	if err != nil {
		return err
	}
	defer lock.Close()
	if leftovers(o.state) {
		logf("cleaning up what a previous run left in %s", o.state)
		if err := teardown(o.state, false); err != nil {
			return err
		}
		if err := os.MkdirAll(o.state, 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(o.state, d), 0o755); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := &cluster{o: o}
	runErr := c.run(ctx)
	if runErr != nil {
		logf("%v", runErr)
	}
	logf("tearing down")
	_, keepFile := os.Stat(filepath.Join(o.state, "keep-logs"))
	keep := o.keepLogs || keepFile == nil
	if err := teardown(o.state, keep); err != nil {
		return errors.Join(runErr, err)
	}
	if keep {
		logf("logs kept in %s", filepath.Join(o.state, "logs"))
	}
	logf("everything stopped and removed")
	return runErr
}

func preflight(o options) error {
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(o.assets, b)); err != nil {
			missing = append(missing, filepath.Join(o.assets, b)+" (KUBELET=1 EXTRA=1 hack/build-control-plane.sh)")
		}
	}
	for _, b := range []string{"containerd", "ctr", "runc", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" (hack/install-test-deps.sh)")
		}
	}
	if o.crioNodes > 0 {
		for _, b := range []string{"crio", "pinns"} {
			if _, err := os.Stat(filepath.Join(o.crioBin, b)); err != nil {
				missing = append(missing, filepath.Join(o.crioBin, b)+" (hack/build-crio.sh)")
			}
		}
		if _, err := exec.LookPath("conmon"); err != nil {
			missing = append(missing, "conmon (hack/build-crio.sh)")
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge (hack/install-test-deps.sh)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (c *cluster) run(ctx context.Context) error {
	t0 := time.Now()
	state := c.o.state
	var err error
	if c.pki, err = newPKI(filepath.Join(state, "pki"), net.ParseIP(serviceHost)); err != nil {
		return fmt.Errorf("making certificates: %w", err)
	}
	pause, err := c.buildPause()
	if err != nil {
		return err
	}
	var crio crioSetup
	if c.o.crioNodes > 0 {
		if crio, err = serveCRIOPause(filepath.Join(state, "pause")); err != nil {
			return err
		}
		defer crio.stopRegistry()
		crio.bin = c.o.crioBin
	}
	ports, err := freePorts(3 + c.o.nodes + c.o.crioNodes)
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	c.server = fmt.Sprintf("https://127.0.0.1:%d", ports[2])

	etcd, err := start(state, "etcd", nil, filepath.Join(c.o.assets, "etcd"),
		"--data-dir", filepath.Join(state, "etcd"), "--name", "default",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	c.procs = append(c.procs, etcd)
	if err := waitFor(ctx, etcd, 30*time.Second, func() bool {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}

	tokens := map[string]string{"admin": randomToken()}
	lines := []string{fmt.Sprintf("%s,admin,admin,\"system:masters\"", tokens["admin"])}
	var nodes []node
	for i := 1; i <= c.o.nodes+c.o.crioNodes; i++ {
		n := node{name: fmt.Sprintf("node-%d", i), index: i, bridge: bridgePrefix + strconv.Itoa(i),
			subnet: fmt.Sprintf("10.244.%d.0/24", i), port: ports[2+i], runtime: runtimeContainerd}
		if i > c.o.nodes {
			n.runtime = runtimeCRIO
		}
		n.dir = filepath.Join(state, n.name)
		nodes = append(nodes, n)
		tokens[n.name] = randomToken()
		// The Node authorizer and NodeRestriction know a kubelet by this
		// user name and group.
		lines = append(lines, fmt.Sprintf("%s,system:node:%s,%s,\"system:nodes\"", tokens[n.name], n.name, n.name))
	}
	if err := os.WriteFile(filepath.Join(state, "tokens.csv"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	for user, token := range tokens {
		if err := c.writeKubeconfig(filepath.Join(state, user+".kubeconfig"), user, token); err != nil {
			return err
		}
	}

	p := c.pki.path
	apiserver, err := start(state, "kube-apiserver", nil, filepath.Join(c.o.assets, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--token-auth-file="+filepath.Join(state, "tokens.csv"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-cluster-ip-range="+serviceCIDR, "--allow-privileged=true",
		// Nodes have no resolvable names here.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p("apiserver-kubelet-client.key"))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, apiserver)
	cs, err := c.client("admin")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, apiserver, 90*time.Second, func() bool {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}); err != nil {
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	logf("API server ready at %s (%.1fs)", c.server, time.Since(t0).Seconds())

	if err := c.serveKubernetesService(ports[2]); err != nil {
		return err
	}
	admin := filepath.Join(state, "admin.kubeconfig")
	for _, args := range [][]string{
		{"kube-controller-manager", "--kubeconfig=" + admin, "--leader-elect=false", "--secure-port=0",
			"--use-service-account-credentials=false",
			// Publishes kube-root-ca.crt in every namespace and creates the
			// default ServiceAccounts, as in any cluster.
			"--root-ca-file=" + p("ca.crt"), "--service-account-private-key-file=" + p("sa.key"),
			"--cluster-signing-cert-file=" + p("ca.crt"), "--cluster-signing-key-file=" + p("ca.key")},
		{"kube-scheduler", "--kubeconfig=" + admin, "--leader-elect=false", "--secure-port=0"},
	} {
		pr, err := start(state, args[0], nil, filepath.Join(c.o.assets, args[0]), args[1:]...)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, pr)
	}

	if err := saveSysctls(state); err != nil {
		return err
	}
	if err := makeMountPoints(state, nodes); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	info := Info{Kubeconfig: admin, Server: c.server, PID: os.Getpid()}
	for _, n := range nodes {
		if err := n.writeConfigs(p("ca.crt"), c.o.insecureRegistries, crio); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		if c.o.imageFsMiB > 0 {
			if err := n.mountImageFs(c.o.imageFsMiB); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		pr, err := start(state, n.name, &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}, self, nodeCommand,
			"-name", n.name, "-dir", n.dir, "-runtime", n.runtime, "-crio-bin", c.o.crioBin, "-kubelet", filepath.Join(c.o.assets, "kubelet"),
			"-kubeconfig", filepath.Join(state, n.name+".kubeconfig"), "-pause", pause, "-logs", filepath.Join(state, "logs"))
		if err != nil {
			return err
		}
		c.procs = append(c.procs, pr)
		ns, err := mountNamespace(pr.cmd.Process.Pid)
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		if err := os.WriteFile(filepath.Join(state, "pids", n.name+".mntns"), []byte(ns), 0o644); err != nil {
			return err
		}
		info.Nodes = append(info.Nodes, NodeInfo{Name: n.name, Runtime: n.runtime, Socket: n.hostSocket(),
			RuntimeAddress: "unix://" + n.socket(), Dir: n.dir, ImageFs: n.imageFs()})
	}
	if err := c.waitNodesReady(ctx, nodes, 2*time.Minute); err != nil {
		return err
	}
	logf("%d node(s) Ready (%.1fs)", len(nodes), time.Since(t0).Seconds())
	// Pods in the default namespace need its ServiceAccount, and their
	// API access volume the CA bundle; the controller manager makes both.
	if err := c.waitAll(ctx, time.Minute, func() bool {
		_, err1 := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		_, err2 := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err1 == nil && err2 == nil
	}); err != nil {
		return fmt.Errorf("default ServiceAccount and kube-root-ca.crt: %w", err)
	}

	b, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(state, "cluster.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	logf("cluster ready in %.1fs", time.Since(t0).Seconds())
	fmt.Printf("cluster ready: %s\n", filepath.Join(state, "cluster.json"))

	return c.watch(ctx)
}

// watch returns when asked to stop (nil) or when a component exits (error).
func (c *cluster) watch(ctx context.Context) error {
	exited := make(chan *proc, len(c.procs))
	for _, p := range c.procs {
		go func() { <-p.exited; exited <- p }()
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-exited:
		return fmt.Errorf("%s exited: %v (log: %s)", p.name, p.err, filepath.Join(c.o.state, "logs", p.name+".log"))
	}
}
