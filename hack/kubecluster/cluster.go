//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/eraser-oss/eraser/internal/testcontainerd"
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
	nodes                      int
	keepLogs                   bool
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
	// Socket is the node's containerd socket as the host reaches it.
	Socket string `json:"socket"`
	// RuntimeAddress is the same socket as the node's pods see it.
	RuntimeAddress string `json:"runtimeAddress"`
	// Dir is the node's private directory: what it mounts on the paths of
	// nodeBinds lies there.
	Dir string `json:"dir"`
	// ImageFs is the node's containerd root as the host reaches it; its
	// pods see it at /var/lib/containerd.
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
	ports, err := freePorts(3 + c.o.nodes)
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
	for i := 1; i <= c.o.nodes; i++ {
		n := node{name: fmt.Sprintf("node-%d", i), index: i, bridge: bridgePrefix + strconv.Itoa(i),
			subnet: fmt.Sprintf("10.244.%d.0/24", i), port: ports[2+i]}
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
	if err := makeMountPoints(state); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	info := Info{Kubeconfig: admin, Server: c.server, PID: os.Getpid()}
	for _, n := range nodes {
		if err := n.writeConfigs(p("ca.crt"), c.o.insecureRegistries); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		if c.o.imageFsMiB > 0 {
			if err := n.mountImageFs(c.o.imageFsMiB); err != nil {
				return fmt.Errorf("%s: %w", n.name, err)
			}
		}
		pr, err := start(state, n.name, &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}, self, nodeCommand,
			"-name", n.name, "-dir", n.dir, "-kubelet", filepath.Join(c.o.assets, "kubelet"),
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
		info.Nodes = append(info.Nodes, NodeInfo{Name: n.name, Socket: n.hostSocket(), RuntimeAddress: "unix://" + nodeSocket, Dir: n.dir, ImageFs: n.imageFs()})
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

// waitFor polls cond until it holds, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *proc, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if !p.running() {
			return fmt.Errorf("exited: %v", p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// waitAll is waitFor while every component keeps running.
func (c *cluster) waitAll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		for _, p := range c.procs {
			if !p.running() {
				return fmt.Errorf("%s exited: %v (log: %s)", p.name, p.err, filepath.Join(c.o.state, "logs", p.name+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted")
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

func (c *cluster) waitNodesReady(ctx context.Context, nodes []node, timeout time.Duration) error {
	cs, err := c.client("admin")
	if err != nil {
		return err
	}
	return c.waitAll(ctx, timeout, func() bool {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := map[string]bool{}
		for _, n := range list.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready[n.Name] = true
				}
			}
		}
		for _, n := range nodes {
			if !ready[n.name] {
				return false
			}
		}
		return true
	})
}

func (c *cluster) writeKubeconfig(path, user, token string) error {
	ca, err := os.ReadFile(c.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubecluster"] = &clientcmdapi.Cluster{Server: c.server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubecluster"] = &clientcmdapi.Context{Cluster: "kubecluster", AuthInfo: user}
	cfg.CurrentContext = "kubecluster"
	return clientcmd.WriteToFile(*cfg, path)
}

func (c *cluster) client(user string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", filepath.Join(c.o.state, user+".kubeconfig"))
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

// buildPause builds the sandbox image every node's containerd runs pods in;
// there is no registry to pull it from.
func (c *cluster) buildPause() (string, error) {
	bin := filepath.Join(c.o.state, "pause")
	src := c.o.pauseSource
	if !filepath.IsAbs(src) {
		src = "./" + filepath.Clean(src)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause binary from %s: %w: %s", c.o.pauseSource, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(c.o.state, "pause.tar")
	err = testcontainerd.WriteArchive(archive, []testcontainerd.Image{{
		Tags: []string{sandboxImage}, Files: map[string][]byte{"pause": data}, Entrypoint: []string{"/pause"},
	}})
	return archive, err
}

// serveKubernetesService makes the kubernetes Service's address work without
// kube-proxy: the address goes on a bridge of its own (pods reach the host
// through their default gateway) and a forwarder passes connections to the
// API server, whose certificate names that address.
func (c *cluster) serveKubernetesService(apiPort int) error {
	for _, args := range [][]string{
		{"link", "add", serviceBridge, "type", "bridge"},
		{"addr", "add", serviceHost + "/32", "dev", serviceBridge},
		{"link", "set", serviceBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(serviceHost, "443"))
	if err != nil {
		return fmt.Errorf("serving the kubernetes Service: %w", err)
	}
	target := fmt.Sprintf("127.0.0.1:%d", apiPort)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(conn, target)
		}
	}()
	return nil
}

func forward(conn net.Conn, target string) {
	defer conn.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, conn)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(conn, up)
	_ = conn.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// saveSysctls records the settings the kubelet rewrites, once: a record left
// by an interrupted run holds the machine's real values.
func saveSysctls(state string) error {
	path := filepath.Join(state, "sysctl.orig")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	var b strings.Builder
	for _, s := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", s, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func restoreSysctls(state string) error {
	f, err := os.Open(filepath.Join(state, "sysctl.orig"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, want, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		path := filepath.Join("/proc/sys", key)
		cur, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(cur)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", key, want, err))
			continue
		}
		logf("restored %s = %s (was %s)", strings.ReplaceAll(key, "/", "."), want, strings.TrimSpace(string(cur)))
	}
	return errors.Join(errs...)
}

// makeMountPoints creates the host directories the nodes mount their
// private ones on, recording those it created so the teardown removes them.
func makeMountPoints(state string) error {
	var created []string
	for _, b := range nodeBinds {
		if _, err := os.Stat(b.dst); err == nil {
			continue
		}
		if err := os.MkdirAll(b.dst, 0o755); err != nil {
			return err
		}
		created = append(created, b.dst)
	}
	return os.WriteFile(filepath.Join(state, "created-paths"), []byte(strings.Join(created, "\n")), 0o644)
}

func leftovers(state string) bool {
	for _, f := range []string{"pids", "sysctl.orig", "created-paths", "cluster.json"} {
		if _, err := os.Stat(filepath.Join(state, f)); err == nil {
			return true
		}
	}
	return false
}

func lockState(state string) (*os.File, error) {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Open(state)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("another kubecluster is using %s (stop it with SIGTERM): %w", state, err)
	}
	return f, nil
}

// teardown stops whatever the pid files name, in order, and undoes every
// host change. It works as well after this program was killed.
func teardown(state string, keepLogs bool) error {
	if _, err := os.Stat(state); os.IsNotExist(err) {
		return nil
	}
	stopRecorded := func(name string, grace time.Duration) {
		if r, err := readPidFile(filepath.Join(state, "pids", name+".pid")); err == nil {
			r.stop(grace)
		}
	}
	// Controllers first, so that nothing reacts to nodes going away.
	stopRecorded("kube-scheduler", 10*time.Second)
	stopRecorded("kube-controller-manager", 10*time.Second)
	var wg sync.WaitGroup
	for _, n := range nodeNames(state) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The node removes its pods and stops its kubelet and containerd.
			stopRecorded(n, 90*time.Second)
			ns, _ := os.ReadFile(filepath.Join(state, "pids", n+".mntns"))
			if k := killStragglers(strings.TrimSpace(string(ns)), state); k > 0 {
				logf("%s: killed %d leftover process(es)", n, k)
			}
		}()
	}
	wg.Wait()
	stopRecorded("kube-apiserver", 15*time.Second)
	stopRecorded("etcd", 10*time.Second)

	var errs []error
	links, _ := filepath.Glob("/sys/class/net/" + bridgePrefix + "*")
	links = append(links, "/sys/class/net/"+serviceBridge)
	for _, l := range links {
		if _, err := os.Stat(l); err != nil {
			continue
		}
		if out, err := exec.Command("ip", "link", "del", filepath.Base(l)).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w: %s", filepath.Base(l), err, out))
		}
	}
	if err := restoreSysctls(state); err != nil {
		errs = append(errs, err)
	}
	unmountUnder(state)
	if b, err := os.ReadFile(filepath.Join(state, "created-paths")); err == nil {
		for _, p := range strings.Fields(string(b)) {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				errs = append(errs, fmt.Errorf("removing %s (created for the nodes): %w", p, err))
			}
		}
	}
	entries, err := os.ReadDir(state)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		if keepLogs && e.Name() == "logs" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(state, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if !keepLogs {
		if err := os.Remove(state); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches whatever is still mounted under dir in this
// namespace, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}
