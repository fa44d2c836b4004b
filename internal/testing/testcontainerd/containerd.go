//go:build linux

// Package testcontainerd runs a private, real containerd (Debian's package,
// installed by hack/install-test-deps.sh) for tests: own root, state, socket
// and runc root, so it never touches a containerd the host may run. Tests
// build images in Go, import them, and run real containers through CRI.
//
// Under -short (the unit tier) the tests skip. Without containerd and runc
// installed they skip too, except under CI, where that is a failure.
//
// What every runtime's test instance shares lives apart: the images tests
// build in testimage, the CRI operations in testcri.
package testcontainerd

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

	"github.com/eraser-oss/eraser/internal/testing/containerdconfig"
	"github.com/eraser-oss/eraser/internal/testing/testcri"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
)

// BinDirEnv names a directory holding another containerd (containerd and
// containerd-shim-runc-v2, as hack/build-containerd.sh builds 2.x) to run
// instead of Debian's: make test-containerd2 runs the worker tier on it.
const BinDirEnv = "CONTAINERD_BIN_DIR"

// binary is the containerd to run, and the PATH it finds its shim on.
func binary() (bin string, env []string) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		return "containerd", nil
	}
	return filepath.Join(dir, "containerd"), append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// SandboxImage is the pause image the private containerd is configured with.
const SandboxImage = testimage.SandboxImage

// Containerd is a running private containerd.
type Containerd struct {
	*testcri.CRI
	Dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Require skips under -short (the unit tier), and skips (or, under CI,
// fails) when containerd cannot run here.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if dir := os.Getenv(BinDirEnv); dir != "" {
		for _, b := range []string{"containerd", "containerd-shim-runc-v2"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				missing = append(missing, BinDirEnv+"/"+b)
			}
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	testcri.RequireRuntime(t, "containerd", missing, "run hack/install-test-deps.sh (make test does)")
}

// Option changes how Start configures containerd.
type Option func(*options)

type options struct {
	rootMiB             int
	plainHTTPRegistries []string
}

// WithSmallDisk puts containerd's root (its content store and snapshots:
// the image filesystem) on a tmpfs of sizeMiB, a filesystem the test fills
// with a few images and measures as the kubelet would (disk-pressure tests).
func WithSmallDisk(sizeMiB int) Option { return func(o *options) { o.rootMiB = sizeMiB } }

// WithPlainHTTPRegistries has containerd pull from these registries
// (host:port, on this machine) over plain HTTP.
func WithPlainHTTPRegistries(hosts ...string) Option {
	return func(o *options) { o.plainHTTPRegistries = append(o.plainHTTPRegistries, hosts...) }
}

// Start runs a private containerd with the sandbox image imported; the test's
// cleanup stops it, with every pod and mount it made.
func Start(t testing.TB, opts ...Option) *Containerd {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	Require(t)
	pause := testimage.Pause(t)
	// Short: the socket path must fit AF_UNIX's 107 bytes.
	dir, err := os.MkdirTemp("", "ctrd")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{Dir: dir}
	c.CRI, err = testcri.Dial(filepath.Join(dir, "c.sock"), testcri.Options{Pod: c.pod, LogTail: c.logTail})
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	if o.rootMiB > 0 {
		if err := os.MkdirAll(c.RootDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", c.RootDir(), "tmpfs", 0, fmt.Sprintf("size=%dm", o.rootMiB)); err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("mounting a %d MiB tmpfs for containerd's root: %v", o.rootMiB, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config(dir, c.Socket, o.plainHTTPRegistries)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stop(t) })
	c.launch(t)
	c.Import(t, testimage.Image{Tags: []string{SandboxImage}, Files: map[string][]byte{"pause": pause}, Entrypoint: []string{"/pause"}})
	return c
}

// RootDir is containerd's root directory (the image filesystem).
func (c *Containerd) RootDir() string { return filepath.Join(c.Dir, "root") }

// pod is a pod as the tests run it on containerd: host network, logs under
// the instance's directory.
func (c *Containerd) pod(name string) (*runtimeapi.PodSandboxConfig, *runtimeapi.LinuxContainerConfig) {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		LogDirectory: filepath.Join(c.Dir, "logs", name),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}, &runtimeapi.LinuxContainerConfig{}
}

// launch starts the containerd process and waits for its socket.
func (c *Containerd) launch(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.Dir, "containerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c.exited = make(chan struct{})
	bin, env := binary()
	c.cmd = exec.Command(bin, "--config", filepath.Join(c.Dir, "config.toml"))
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := c.cmd, c.exited
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(c.Socket); err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
			t.Fatalf("containerd did not start:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills containerd with SIGKILL, as a crash would; its shims, and so
// the containers, keep running. Restart brings it back.
func (c *Containerd) Kill(t testing.TB) {
	t.Helper()
	_ = c.cmd.Process.Kill()
	<-c.exited
	// A killed containerd leaves its socket; a new one replaces it.
	_ = os.Remove(c.Socket)
}

// Restart starts containerd again on the same state, after Kill.
func (c *Containerd) Restart(t testing.TB) {
	t.Helper()
	c.launch(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd's testcri.CRI did not come back after a restart: %v\n%s", err, c.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Signal sends sig to the containerd process (SIGSTOP/SIGCONT to hang it).
func (c *Containerd) Signal(sig syscall.Signal) error { return c.cmd.Process.Signal(sig) }

// Stop hangs containerd (SIGSTOP) and returns once it is stopped, so that
// the next call surely finds it hung; Signal(SIGCONT) resumes it.
func (c *Containerd) Stop(t testing.TB) {
	t.Helper()
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		// The state follows the command name, in parentheses.
		if b, err := os.ReadFile(stat); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
				return
			}
		}
	}
	t.Fatal("containerd did not stop")
}

func (c *Containerd) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "containerd.log"))
	lines := strings.Split(string(b), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// stop removes every pod, stops containerd and its shims, unmounts what is
// left under the base directory and removes it.
func (c *Containerd) stop(t testing.TB) {
	c.CRI.Close()
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
	killShims(c.Socket)
	testcri.UnmountUnder(c.Dir)
	if err := os.RemoveAll(c.Dir); err != nil {
		t.Logf("cleaning %s: %v", c.Dir, err)
	}
}

// killShims ends containerd shims started for this instance (they outlive
// containerd by design).
func killShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), socket) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "%d", &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func config(dir, socket string, plainHTTPRegistries []string) string {
	return containerdconfig.TOML(containerdconfig.Options{
		Dir: dir, Socket: socket, SandboxImage: SandboxImage,
		CNIBinDir: filepath.Join(dir, "cni", "bin"), CNIConfDir: filepath.Join(dir, "cni", "conf"),
		PlainHTTPRegistries: plainHTTPRegistries,
	})
}
