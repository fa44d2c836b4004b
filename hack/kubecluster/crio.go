//go:build linux

// The cluster's CRI-O nodes (-crio-nodes): a kubelet on CRI-O (built by
// hack/build-crio.sh, configured by internal/testing/testcrio's Config) instead of
// containerd, seen by its pods and by Eraser as a CRI-O node of a real
// cluster sees it: the socket at CRI-O's default address and the image
// store at its default root.

package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/testcrio"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

const (
	runtimeContainerd = "containerd"
	runtimeCRIO       = "crio"
	// runtimeLabel on every node says which runtime it runs, for the
	// selectors that keep a cluster-wide configuration (one runtime each)
	// to the nodes of its runtime, as a mixed cluster needs.
	runtimeLabel = "kubecluster.eraser.sh/runtime"
	// crioSocket is CRI-O's default address, what Eraser's runtime "crio"
	// connects to; crioStorage is CRI-O's default root, the default of
	// manager.retention.imageFsPath on "crio".
	crioRunDir  = "/var/run/crio"
	crioSocket  = crioRunDir + "/crio.sock"
	crioStorage = "/var/lib/containers/storage"
)

// crioBinds are a CRI-O node's private mounts besides commonBinds. All of
// /var/lib/containers, not only the storage: containers/image writes its
// blob-info cache beside it, which must not reach the machine's.
var crioBinds = []bind{
	{"crio/run", crioRunDir},
	{"crio/containers", "/var/lib/containers"},
}

// crioSetup is what every CRI-O node shares: the binaries, and the
// loopback registry that serves their sandbox image (CRI-O has no import:
// its images arrive by pulls).
type crioSetup struct {
	bin          string
	pauseMirror  string
	stopRegistry func()
}

// serveCRIOPause starts a registry on loopback holding the sandbox image,
// for as long as the cluster runs; the CRI-O nodes' registries.conf names
// it as registry.k8s.io's mirror, so the image keeps its name.
func serveCRIOPause(pauseBinary string) (crioSetup, error) {
	data, err := os.ReadFile(pauseBinary)
	if err != nil {
		return crioSetup{}, err
	}
	img, err := testimage.Image{Tags: []string{sandboxImage}, Files: map[string][]byte{"pause": data},
		Entrypoint: []string{"/pause"}}.Build()
	if err != nil {
		return crioSetup{}, err
	}
	host, stop, err := testregistry.Listen()
	if err != nil {
		return crioSetup{}, err
	}
	// In the mirror's layout: the image's registry host (registry.k8s.io)
	// first in the path.
	if err := testregistry.Push(host, sandboxImage, img); err != nil {
		stop()
		return crioSetup{}, fmt.Errorf("pushing the sandbox image to the CRI-O nodes' registry: %w", err)
	}
	return crioSetup{pauseMirror: host + "/registry.k8s.io", stopRegistry: stop}, nil
}

// cgroupRoot is the cgroup the node's kubelet puts every pod under, of
// its own so that the teardown finds all of it: unique per state
// directory and node, and the same after a crash.
func (n node) cgroupRoot() string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(filepath.Dir(n.dir)))
	return fmt.Sprintf("/kubecluster-%08x-%s", h.Sum32(), n.name)
}

// writeCRIOConfig writes crio.conf, registries.conf and policy.json under
// the node's crio directory, creates the node's cgroup root and returns
// the kubelet's cgroup settings.
//
// Why the kubelet's QoS cgroups (cgroupsPerQOS, under the node's own
// cgroupRoot), which the containerd nodes do without: without a pod cgroup
// from the kubelet, CRI-O's cgroupfs manager puts containers under /crio
// and each conmon in a crio-conmon-<id> at the top of every hierarchy,
// which nothing would find to remove. Under cgroupRoot, the teardown kills
// whatever is left in the tree and removes it.
func (n node) writeCRIOConfig(plainHTTPRegistries []string, c crioSetup) (string, error) {
	dir := filepath.Join(n.dir, "crio")
	for _, d := range testcrio.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	conf := testcrio.Config(testcrio.ConfigOptions{
		Dir: dir, Root: crioStorage, Socket: crioSocket, BinDir: c.bin, PauseImage: sandboxImage,
		CNIConfDir: filepath.Join(n.dir, "cni", "conf"), CNIPluginDir: "/usr/lib/cni",
	})
	// No search registries: a short name would otherwise be tried against
	// docker.io, which this machine may not reach.
	reg := "unqualified-search-registries = []\nshort-name-mode = \"disabled\"\n"
	reg += fmt.Sprintf("\n[[registry]]\nprefix = \"registry.k8s.io\"\nlocation = \"registry.k8s.io\"\n\n[[registry.mirror]]\nlocation = %q\ninsecure = true\n", c.pauseMirror)
	for _, r := range plainHTTPRegistries {
		reg += fmt.Sprintf("\n[[registry]]\nlocation = %q\ninsecure = true\n", r)
	}
	for name, content := range map[string]string{
		"crio.conf": conf, "registries.conf": reg,
		"policy.json": `{"default":[{"type":"insecureAcceptAnything"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := makeCgroup(n.cgroupRoot()); err != nil {
		return "", fmt.Errorf("creating the node's cgroup %s: %w", n.cgroupRoot(), err)
	}
	// Recorded for the teardown, which may run after this process died.
	if err := os.WriteFile(filepath.Join(n.dir, "cgroup-root"), []byte(n.cgroupRoot()), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("# CRI-O: pods under the node's own cgroup (writeCRIOConfig says why).\ncgroupsPerQOS: true\ncgroupRoot: %s\n", n.cgroupRoot()), nil
}

// makeCgroup creates a cgroup in every hierarchy, as the kubelet requires
// of its cgroupRoot. A new cpuset cgroup (cgroup v1) takes no process until
// it has CPUs and memory nodes, so it gets its parent's.
func makeCgroup(path string) error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll("/sys/fs/cgroup"+path, 0o755)
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue
		}
		if err := os.MkdirAll(h+path, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(h+path, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeNodeCgroup kills what is left in a CRI-O node's cgroup tree (every
// container and conmon of the node lives there; after a crash some may
// outlive the node) and removes the tree. It returns what it could not
// remove.
func removeNodeCgroup(nodeDir string) []string {
	b, err := os.ReadFile(filepath.Join(nodeDir, "cgroup-root"))
	if err != nil {
		return nil
	}
	root := strings.TrimSpace(string(b))
	trees, _ := filepath.Glob("/sys/fs/cgroup/*" + root)
	trees = append(trees, "/sys/fs/cgroup"+root)
	for _, tree := range trees {
		_ = filepath.WalkDir(tree, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			procs, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
	return testcrio.RemoveCgroups(root)
}

// hideUnmountedControllers shows the node's namespace a /proc/cgroups
// without the cgroup v1 controllers that the kernel has but no hierarchy
// is mounted for (hierarchy 0), as hugetlb on this project's machines.
// CRI-O takes a controller listed there as usable and passes the kubelet's
// hugepage limits (which it sends for every page size the machine has) to
// runc, which then fails every container ("cannot set hugetlb limit");
// containerd tolerates the missing controller by default
// (tolerate_missing_hugetlb_controller) and CRI-O has no such setting.
// The containers' own /proc is a new mount and sees the real file.
func (n node) hideUnmountedControllers() error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return nil // cgroup v2: one hierarchy, every line says 0
	}
	b, err := os.ReadFile("/proc/cgroups")
	if err != nil {
		return err
	}
	var keep []string
	hidden := false
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "0" && f[3] == "1" {
			hidden = true
			continue
		}
		keep = append(keep, line)
	}
	if !hidden {
		return nil
	}
	file := filepath.Join(n.dir, "proc-cgroups")
	if err := os.WriteFile(file, []byte(strings.Join(keep, "\n")+"\n"), 0o444); err != nil {
		return err
	}
	return syscall.Mount(file, "/proc/cgroups", "", syscall.MS_BIND, "")
}

// startCRIO runs CRI-O, waits until it answers CRI and pulls the sandbox
// image through it, as a node's first pod would.
func (n node) startCRIO(logs, bin string) (*proc, error) {
	dir := filepath.Join(n.dir, "crio")
	if err := n.hideUnmountedControllers(); err != nil {
		return nil, fmt.Errorf("%s: %w", n.name, err)
	}
	// CRI-O gives a hostPath volume that holds its storage root (Eraser's
	// imageFsPath on crio) HostToContainer propagation, whatever the pod
	// asks, and refuses it unless the source is a shared or slave mount,
	// as on a real node, where systemd makes every mount shared. The
	// node's namespace was made with every mount private; shared here,
	// the mount's peers are in this namespace and its containers only,
	// never the host's.
	if err := syscall.Mount("", "/var/lib/containers", "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return nil, fmt.Errorf("%s: making /var/lib/containers a shared mount: %w", n.name, err)
	}
	p, err := startChild(logs, n.name+"-crio", filepath.Join(bin, "crio"), testcrio.Args(dir)...)
	if err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) (*proc, error) {
		n.stop(nil, p)
		return nil, fmt.Errorf("%s: %s (log: %s)", n.name, fmt.Sprintf(format, args...), filepath.Join(logs, n.name+"-crio.log"))
	}
	conn, err := grpc.NewClient("unix://"+crioSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail("%v", err)
	}
	defer conn.Close()
	// The socket appears before the CRI services are registered.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			break
		}
		if !p.running() || time.Now().After(deadline) {
			return fail("CRI-O did not answer: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: sandboxImage}}); err != nil {
		return fail("pulling the sandbox image: %v", err)
	}
	return p, nil
}
