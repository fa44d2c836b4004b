//go:build linux

// Command kubecluster runs a small but real Kubernetes cluster on this
// machine, for the kubelet end-to-end tier and the demo: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler (built by
// hack/build-control-plane.sh), and N nodes, each a real kubelet on its own
// containerd (Debian's, see hack/install-test-deps.sh).
//
//	kubecluster up   [-state DIR] [-nodes N] [-assets DIR] [-insecure-registry HOST:PORT] [-imagefs-size MiB]   # runs until SIGINT/SIGTERM, then tears down
//	kubecluster down [-state DIR]                            # clean up after an up that was killed
//	kubecluster seed [-state DIR] -node NAME IMAGE...        # import small test images into a running node
//
// Every node runs in its own mount namespace, where its containerd listens on
// /run/containerd/containerd.sock, upstream Eraser's default runtime address,
// so one configuration reaches every node's own runtime; the host reaches
// node N's socket at DIR/node-N/run/containerd.sock. The host's own
// /run/containerd (another containerd may live there) is never touched.
//
// There is no kube-proxy: the kubernetes Service's address (10.96.0.1:443) is
// put on a bridge of its own and forwarded to the API server, so in-cluster
// clients work unchanged. When the cluster is ready, DIR/cluster.json
// describes it and "cluster ready" is printed.
//
// Needs root. Changes to the host, all undone by the teardown: the kubelet
// rewrites vm.overcommit_memory, kernel.panic and kernel.panic_on_oops
// (saved first, restored); bridges erk-svc0 and erk-cni1..N; mount points
// for the nodes' private mounts, when missing (/var/lib/kubelet,
// /var/log/pods, /var/log/containers, /run/containerd, /var/lib/eraser,
// /var/lib/containerd), removed again; what the nodes write there (Eraser's
// state file among it) stays in DIR, so an existing directory's content is
// never touched.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/eraser-oss/eraser/internal/endpoint"
)

const defaultState = "/tmp/eraser-kubecluster"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "up":
		err = upMain(args)
	case "down":
		err = downMain(args)
	case "seed":
		err = seedMain(args)
	case nodeCommand:
		err = nodeMain(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubecluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kubecluster up|down|seed [flags]   (kubecluster up -h for more)")
	os.Exit(2)
}

func upMain(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	o := options{}
	fs.StringVar(&o.state, "state", defaultState, "directory for everything the cluster writes; removed at teardown")
	fs.IntVar(&o.nodes, "nodes", 2, "number of nodes (kubelet + containerd each; about 170 MB of memory per node)")
	fs.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"),
		"directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubelet (KUBELET=1 EXTRA=1 hack/build-control-plane.sh)")
	fs.StringVar(&o.pauseSource, "pause-source", "test/images/pause", "Go package of the sandbox (pause) image's binary")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep DIR/logs after teardown (also when DIR/keep-logs exists)")
	fs.IntVar(&o.imageFsMiB, "imagefs-size", 0, "MiB of a tmpfs for each node's containerd root (its image filesystem); 0: on the disk holding DIR")
	fs.Func("insecure-registry", "HOST:PORT of a registry on this machine (127.0.0.0/8, localhost, [::1]) the nodes pull from over plain HTTP (repeatable)", func(v string) error {
		host, _, err := net.SplitHostPort(v)
		if err != nil {
			return fmt.Errorf("%q: want HOST:PORT: %w", v, err)
		}
		if !endpoint.IsLoopbackHost(host) {
			return fmt.Errorf("%q: plain HTTP only to a registry on this machine (127.0.0.0/8, localhost, [::1])", v)
		}
		o.insecureRegistries = append(o.insecureRegistries, v)
		return nil
	})
	_ = fs.Parse(args)
	if o.nodes < 1 || o.nodes > 9 {
		return fmt.Errorf("-nodes must be 1..9")
	}
	if o.assets == "" {
		return fmt.Errorf("-assets (or KUBEBUILDER_ASSETS) is required")
	}
	var err error
	if o.state, err = filepath.Abs(o.state); err != nil {
		return err
	}
	return up(o)
}

func downMain(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	state := fs.String("state", defaultState, "the cluster's state directory")
	keep := fs.Bool("keep-logs", false, "keep DIR/logs")
	_ = fs.Parse(args)
	dir, err := filepath.Abs(*state)
	if err != nil {
		return err
	}
	lock, err := lockState(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	return teardown(dir, *keep)
}

func seedMain(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	state := fs.String("state", defaultState, "the running cluster's state directory")
	nodeName := fs.String("node", "node-1", "node to import the images into")
	size := fs.Int("size", 1<<20, "bytes of random content per image, so that each has its own ID and a size")
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		return fmt.Errorf("seed: name at least one image")
	}
	return seed(*state, *nodeName, *size, fs.Args())
}
