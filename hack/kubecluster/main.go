//go:build linux

// Command kubecluster runs a small but real Kubernetes cluster on this
// machine, for the kubelet end-to-end tier and the demo: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler (built by
// hack/build-control-plane.sh), and N nodes, each a real kubelet on its own
// containerd (Debian's, see hack/install-test-deps.sh), and M more on their
// own CRI-O (hack/build-crio.sh; -crio-nodes M).
//
//	kubecluster up   [-state DIR] [-nodes N] [-crio-nodes M -crio-bin DIR] [-assets DIR] [-insecure-registry HOST:PORT] [-imagefs-size MiB]   # runs until SIGINT/SIGTERM, then tears down
//	kubecluster down [-state DIR]                            # clean up after an up that was killed
//	kubecluster seed [-state DIR] -node NAME IMAGE...        # import small test images into a running node
//
// Every node runs in its own mount namespace, where its containerd listens on
// /run/containerd/containerd.sock, upstream Eraser's default runtime address,
// so one configuration reaches every node's own runtime; the host reaches
// node N's socket at DIR/node-N/run/containerd.sock. The host's own
// /run/containerd (another containerd may live there) is never touched.
// A CRI-O node likewise listens on /var/run/crio/crio.sock (CRI-O's default,
// DIR/node-N/crio/run/crio.sock from the host) with its image store at
// /var/lib/containers/storage; its kubelet puts pods under a cgroup of the
// node's own (/kubecluster-<hash>-node-N), which the teardown removes, and
// it pulls its sandbox image from a registry on loopback this program
// serves (CRI-O imports nothing), named as registry.k8s.io's mirror. Every
// node carries the label kubecluster.eraser.sh/runtime=containerd|crio.
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
// /var/lib/containerd; for CRI-O nodes /run/crio and /var/lib/containers),
// removed again; what the nodes write there (Eraser's
// state file among it) stays in DIR, so an existing directory's content is
// never touched.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/wire/endpoint"
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
	fs.IntVar(&o.crioNodes, "crio-nodes", 0, "number of nodes more whose kubelet runs on CRI-O (named after the containerd ones)")
	fs.StringVar(&o.crioBin, "crio-bin", os.Getenv("CRIO_BIN_DIR"), "directory of crio and pinns, for -crio-nodes (hack/build-crio.sh prints it)")
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
	if o.nodes < 1 || o.crioNodes < 0 || o.nodes+o.crioNodes > 9 {
		return fmt.Errorf("-nodes must be 1..9, with -crio-nodes at most 9 in all")
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

// seed imports images made of the pause binary and some random bytes into a
// node's runtime: stand-ins for the images a real node accumulates.
func seed(state, nodeName string, size int, tags []string) error {
	pause, err := os.ReadFile(filepath.Join(state, "pause"))
	if err != nil {
		return fmt.Errorf("is the cluster in %s running? %w", state, err)
	}
	socket := node{dir: filepath.Join(state, nodeName)}.hostSocket()
	if _, err := os.Stat(socket); err != nil {
		if _, cerr := os.Stat(node{dir: filepath.Join(state, nodeName), runtime: runtimeCRIO}.hostSocket()); cerr == nil {
			return fmt.Errorf("%s runs CRI-O, which imports nothing: images reach it by a pull (from a -insecure-registry)", nodeName)
		}
		return fmt.Errorf("no node %s: %w", nodeName, err)
	}
	var imgs []testimage.Image
	for _, t := range tags {
		imgs = append(imgs, testimage.Image{Tags: []string{t}, Files: map[string][]byte{"pause": pause},
			Entrypoint: []string{"/pause"}, RandomBytes: size})
	}
	f, err := os.CreateTemp(state, "seed-*.tar")
	if err != nil {
		return err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	if err := testimage.WriteArchive(f.Name(), imgs); err != nil {
		return err
	}
	if out, err := exec.Command("ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", f.Name()).CombinedOutput(); err != nil {
		return fmt.Errorf("importing into %s: %w: %s", nodeName, err, out)
	}
	return nil
}
