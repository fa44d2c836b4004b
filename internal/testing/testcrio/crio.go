//go:build linux

// Package testcrio runs a private, real CRI-O for tests, as testcontainerd
// does for containerd: own root, runroot, socket, config and runc root under
// the test's temporary directory, so it never touches a CRI-O or a
// containers/storage the host may have. CRI-O is built from source by
// hack/build-crio.sh (no package or download exists here); conmon and runc
// are Debian's.
//
// CRI-O has no import command, so images reach it the way they reach a real
// node: a pull. Each instance serves the test's images from a registry on
// loopback, configured as a mirror of the images' own registries, so an
// image keeps the name the test gave it and gets a repo digest, as a pull
// from the real registry would record.
//
// Under -short (the unit tier) the tests skip. Without the binaries, root,
// conmon or runc they skip too, except under CI, where that is a failure.
package testcrio

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/eraser-oss/eraser/internal/testing/repo"
	"github.com/eraser-oss/eraser/internal/testing/testcri"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testregistry"
)

// SandboxImage is the default pause image, the same as testcontainerd's, so
// a test can run against either runtime with the same expectations.
const SandboxImage = testimage.SandboxImage

// CRIO is a running private CRI-O.
type CRIO struct {
	*testcri.CRI
	Dir string

	bin  string
	opts options
	// cgroup parents every pod's cgroups (and conmon's, with conmon_cgroup
	// "pod"), so that the cleanup finds and removes all of them.
	cgroup string
	cmd    *exec.Cmd
	exited chan struct{}
	// registry is the loopback registry's address (host:port).
	registry string
	holds    *holds
	// mirrored are the registry hosts registries.conf sends to the loopback
	// registry; a new one needs the file rewritten and CRI-O reloaded.
	mirrored map[string]bool
	reloads  int
}

// Option changes how Start configures CRI-O.
type Option func(*options)

type options struct {
	pinnedImages []string
	rootMiB      int
	// insecure are registries pulled from as they are, in plain HTTP.
	insecure []string
}

// WithInsecureRegistries makes CRI-O pull from the registries (host:port)
// in plain HTTP, not through this instance's mirror: a test's own loopback
// registry.
func WithInsecureRegistries(hosts ...string) Option {
	return func(o *options) { o.insecure = append(o.insecure, hosts...) }
}

// WithSmallDisk puts CRI-O's image store on a tmpfs of sizeMiB, a
// filesystem the test fills and measures (disk-pressure tests).
func WithSmallDisk(sizeMiB int) Option { return func(o *options) { o.rootMiB = sizeMiB } }

// WithPinnedImages sets CRI-O's pinned_images, which CRI-O reports as
// Image.Pinned (the pause image is pinned by CRI-O whatever this says).
func WithPinnedImages(refs ...string) Option {
	return func(o *options) { o.pinnedImages = append(o.pinnedImages, refs...) }
}

// Require skips under -short (the unit tier), and skips (or, under CI,
// fails) when CRI-O cannot run here.
func Require(t testing.TB) {
	t.Helper()
	_, missing := binDir()
	for _, b := range []string{"conmon", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	testcri.RequireRuntime(t, "CRI-O", missing, "run hack/build-crio.sh")
}

// binDir finds crio and pinns: CRIO_BIN_DIR, else the build script's cache,
// asked of the script so that the two never disagree on where it is.
func binDir() (string, []string) {
	dir := os.Getenv("CRIO_BIN_DIR")
	if dir == "" {
		script := repo.Path("hack", "build-crio.sh")
		out, err := exec.Command("bash", "-c", `CHECK_ONLY=1 "$0"`, script).Output()
		if err != nil {
			return "", []string{"crio and pinns (hack/build-crio.sh has not built them)"}
		}
		dir = strings.TrimSpace(string(out))
	}
	var missing []string
	for _, b := range []string{"crio", "pinns"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, filepath.Join(dir, b))
		}
	}
	return dir, missing
}

// Start runs a private CRI-O with the pause image on it; the test's cleanup
// stops it, with every pod, mount, cgroup and file it made.
func Start(t testing.TB, opts ...Option) *CRIO {
	t.Helper()
	Require(t)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, _ := binDir()
	dir := t.TempDir()
	c := &CRIO{
		Dir: dir, bin: bin, opts: o, mirrored: map[string]bool{},
		cgroup: fmt.Sprintf("/eraser-testcrio-%d-%d", os.Getpid(), time.Now().UnixNano()),
	}
	socket := filepath.Join(dir, "crio.sock")
	// AF_UNIX paths are limited to 107 bytes. conmon reaches its own sockets
	// through /proc/self/fd, whatever their length; CRI-O's listener cannot.
	if len(socket) > 100 {
		t.Fatalf("CRI-O's directory %s is too long for its sockets; use a shorter test name", dir)
	}
	var err error
	c.CRI, err = testcri.Dial(socket, testcri.Options{Pod: c.pod, LogTail: func() string { return c.logTail(20) }, DigestsInIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.holds = &holds{}
	// Registered before stop, so it serves until CRI-O has stopped.
	c.registry = testregistry.Serve(t, registryHandler(c.holds))
	t.Cleanup(func() { c.stop(t) })
	if o.rootMiB > 0 {
		// stop unmounts it with everything else under dir.
		if err := os.MkdirAll(c.RootDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", c.RootDir(), "tmpfs", 0, fmt.Sprintf("size=%dm", o.rootMiB)); err != nil {
			t.Fatalf("mounting a %d MiB tmpfs for CRI-O's image store: %v", o.rootMiB, err)
		}
	}
	c.writeFile(t, "policy.json", `{"default":[{"type":"insecureAcceptAnything"}]}`)
	c.mirror(hostOf(SandboxImage))
	c.writeFile(t, "registries.conf", c.registriesConf())
	c.writeFile(t, "crio.conf", c.config())
	c.launch(t)
	c.waitReady(t)
	c.Import(t, testimage.Image{
		Tags: []string{SandboxImage}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"},
	})
	return c
}

func (c *CRIO) writeFile(t testing.TB, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ConfigFile is this instance's crio.conf.
func (c *CRIO) ConfigFile() string { return filepath.Join(c.Dir, "crio.conf") }

// RootDir is CRI-O's storage root (the image filesystem).
func (c *CRIO) RootDir() string { return filepath.Join(c.Dir, "root") }

func (c *CRIO) launch(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.Dir, "crio.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(filepath.Join(c.bin, "crio"), Args(c.Dir)...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	// Its own process group, so a hung CRI-O and its children can be killed
	// together without touching anything else.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.exited = make(chan struct{})
	cmd, exited := c.cmd, c.exited
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
}

// Kill kills CRI-O with SIGKILL, as a crash would: no clean-shutdown file
// is written, so the next start finds the store as the crash left it.
// Restart brings it back.
func (c *CRIO) Kill(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// Restart starts CRI-O again on the same configuration and store, after
// Kill, and waits until its CRI answers.
func (c *CRIO) Restart(t testing.TB) {
	t.Helper()
	c.launch(t)
	c.waitReady(t)
}

// waitReady waits until CRI-O answers Version: the socket appears before the
// CRI services are registered.
func (c *CRIO) waitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-c.exited:
			t.Fatalf("crio exited at start:\n%s", c.logTail(40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("CRI-O did not answer Version within 60s: %v\n%s", err, c.logTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *CRIO) logTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "crio.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop removes every pod (CRI-O's conmons outlive it otherwise), stops
// CRI-O, unmounts what is left under its directory and removes it.
func (c *CRIO) stop(t testing.TB) {
	c.CRI.Close()
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(20 * time.Second):
			t.Logf("crio did not stop on SIGTERM; killing its process group")
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.exited
		}
	}
	killUnder(c.Dir)
	if left := RemoveCgroups(c.cgroup); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	testcri.UnmountUnder(c.Dir)
	// t.TempDir removes the directory after this; a mount left in it would
	// make that fail, so say which.
	if left := testcri.MountsUnder(c.Dir); len(left) > 0 {
		t.Errorf("mounts left under %s: %v", c.Dir, left)
	}
}

// killUnder ends conmons whose command line names this instance's
// directory and container processes whose root is in it: conmon detaches
// from CRI-O, so neither is in a process group of ours. Only a CRI-O that
// did not stop its pods leaves any.
func killUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		b, _ := os.ReadFile(p + "/cmdline")
		root, _ := os.Readlink(p + "/root")
		if !strings.Contains(string(b), dir+"/") && !strings.HasPrefix(root, dir+"/") {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(p), "%d", &pid); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// RemoveCgroups removes a cgroup tree (an instance's, or a kubecluster
// CRI-O node's) in every hierarchy (cgroup v1 has one per controller),
// deepest first: rmdir only takes an empty cgroup, and runc removes a
// container's own but not its parents. It returns what it could not remove.
func RemoveCgroups(parent string) (left []string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*" + parent)
	roots = append(roots, "/sys/fs/cgroup"+parent)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			// A process may take a moment to leave a cgroup after SIGKILL.
			for try := 0; try < 50; try++ {
				if err := os.Remove(dirs[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := os.Stat(dirs[i]); err == nil {
				left = append(left, dirs[i])
			}
		}
	}
	return left
}
