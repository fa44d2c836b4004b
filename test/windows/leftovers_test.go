//go:build linux

// Package windows runs the Windows eraser command under Wine against a real
// containerd reached through a named pipe, as on a Windows node, where
// containerd serves the CRI and its own API on
// npipe://./pipe/containerd-containerd. No Windows containerd runs here: a
// Linux containerd's unix socket is relayed to a TCP port on loopback, and
// a Windows program under Wine (internal/testing/piperelay) listens on a
// named pipe and relays each connection to that port. Run by make
// test-windows, which gives WINEPREFIX.
package windows

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/eraser-oss/eraser/internal/cli/nodecmd"
	"github.com/eraser-oss/eraser/internal/node/leftover"
	"github.com/eraser-oss/eraser/internal/testing/gobuild"
	"github.com/eraser-oss/eraser/internal/testing/testcontainerd"
	"github.com/eraser-oss/eraser/internal/testing/testimage"
	"github.com/eraser-oss/eraser/internal/testing/testleftovers"
	"github.com/eraser-oss/eraser/internal/wire/leftoverkind"
)

const mib = 1 << 20

// commandDeadline bounds one run of a command; a listing under Wine
// takes about a second.
const commandDeadline = 2 * time.Minute

// requireWine skips under -short, and skips (or, under CI, fails) without
// Wine and its prefix.
func requireWine(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the Windows tier runs it (make test-windows)")
	}
	var missing []string
	if os.Getenv("WINEPREFIX") == "" {
		missing = append(missing, "WINEPREFIX")
	}
	if _, err := exec.LookPath("wine"); err != nil {
		missing = append(missing, "wine")
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("the Windows command under Wine needs %v; make test-windows sets them up (hack/install-wine.sh)", missing)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// The commands the test runs: the Linux eraser, and the Windows eraser and
// relay as a release builds them (static, amd64).
var (
	linuxCommands   = gobuild.New("cmd/eraser")
	windowsCommands = gobuild.New("cmd/eraser", "internal/testing/piperelay").For("windows", "amd64")
)

func TestMain(m *testing.M) {
	code := m.Run()
	linuxCommands.Remove()
	windowsCommands.Remove()
	os.Exit(code)
}

// binaries are the commands the test runs.
type binaries struct {
	eraser, eraserExe, relayExe string
}

// build builds the commands, both platforms at once.
func build(t *testing.T) binaries {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = linuxCommands.Build() })
	wg.Go(func() { _, _ = windowsCommands.Build() })
	wg.Wait()
	b := binaries{eraser: linuxCommands.Path(t)}
	windows := windowsCommands.Dir(t)
	b.eraserExe, b.relayExe = filepath.Join(windows, "eraser.exe"), filepath.Join(windows, "piperelay.exe")
	return b
}

// relayToUnix relays a TCP port on loopback to the unix socket, until the
// test ends; it returns the port's address.
func relayToUnix(t *testing.T, socket string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer up.Close()
				track(c, true)
				track(up, true)
				defer track(c, false)
				defer track(up, false)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// pipeRelay runs the relay under Wine, listening on a fresh named pipe
// and relaying to addr, until the test ends; it returns the pipe's
// endpoint.
func pipeRelay(t *testing.T, relayExe, addr string) string {
	t.Helper()
	name := fmt.Sprintf("eraser-test-containerd-%d", time.Now().UnixNano())
	cmd := exec.Command("wine", relayExe, "-pipe", name, "-to", addr)
	cmd.Env = append(os.Environ(), "WINEDEBUG=-all")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// One reader of its output: its first line, then the rest, until it
	// ends.
	ready, exited := make(chan error, 1), make(chan struct{})
	go func() {
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()
		close(exited)
	}()
	// Its end: standard input closed, then, should it hang, killed.
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("the pipe relay under Wine: %v\n%s", err, stderr.String())
		}
	case <-time.After(commandDeadline):
		t.Fatalf("the pipe relay under Wine was not ready within %v\n%s", commandDeadline, stderr.String())
	}
	return "npipe://./pipe/" + name
}

// lockedBuffer is a process's output read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// run runs a command with a deadline and returns its output and exit code.
func run(t *testing.T, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "WINEDEBUG=-all")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s %s: no end within %v\n%s", name, strings.Join(args, " "), commandDeadline, errOut.String())
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// node runs "eraser node ARGS" with the Windows command under Wine
// (windows) or the Linux command.
type node struct {
	t         *testing.T
	bin       binaries
	pipe      string // the named pipe, for the Windows command
	socket    string // containerd's socket, for the Linux command
	stateDir  string
	excludeTo string
}

func (n node) eraser(windows bool, args ...string) (string, string, int) {
	n.t.Helper()
	if windows {
		return run(n.t, "wine", append([]string{n.bin.eraserExe, "node"}, append(args, "--runtime-endpoint", n.pipe)...)...)
	}
	return run(n.t, n.bin.eraser, append([]string{"node"}, append(args, "--runtime-endpoint", "unix://"+n.socket)...)...)
}

// leftovers lists the leftovers, every lease a leftover, in a fixed order.
func (n node) leftovers(windows bool) []leftover.Leftover {
	n.t.Helper()
	out, stderr, code := n.eraser(windows, "list", "--leftovers", "-o", "json", "--lease-age=0s")
	if code != 0 {
		n.t.Fatalf("list --leftovers (windows: %v): exit %d\n%s", windows, code, stderr)
	}
	var found []leftover.Leftover
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		n.t.Fatalf("list --leftovers -o json (windows: %v): %v\n%s", windows, err, out)
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		return string(a.Kind)+" "+a.Namespace+" "+a.Name < string(b.Kind)+" "+b.Namespace+" "+b.Name
	})
	return found
}

// same lists with both commands and fails when they differ: the same
// records, read through the pipe and through the socket. Why is left out:
// a lease's says its age, which grows between the two.
func (n node) same() []leftover.Leftover {
	n.t.Helper()
	win, linux := n.leftovers(true), n.leftovers(false)
	if diff := cmp.Diff(linux, win, cmpopts.IgnoreFields(leftover.Leftover{}, "Why")); diff != "" {
		n.t.Errorf("the Windows command through the named pipe lists other leftovers than the Linux command on the socket (-linux +windows):\n%s", diff)
	}
	return win
}

// prune runs "eraser node prune" with the Windows command: the image
// named removed, and every kind of leftover reclaimed that can be,
// the images of namespace default among them.
func (n node) prune(image string, dryRun bool) nodecmd.PruneOutput {
	n.t.Helper()
	args := []string{"prune", "--images", image, "--reclaim", "unnamed-image,other-namespace,old-lease,unreferenced",
		"--reclaim-namespaces", "default", "--lease-age=0s", "--exclude-file", winPath(n.excludeTo), "--state-dir", winPath(n.stateDir), "-o", "json"}
	if dryRun {
		args = append(args, "--dry-run")
	}
	out, stderr, code := n.eraser(true, args...)
	if code != 0 {
		n.t.Fatalf("prune (dry run: %v): exit %d\n%s\n%s", dryRun, code, out, stderr)
	}
	var po nodecmd.PruneOutput
	if err := json.Unmarshal([]byte(out), &po); err != nil {
		n.t.Fatalf("prune -o json: %v\n%s", err, out)
	}
	return po
}

// winPath is a Linux path as a Windows program under Wine names it (Wine's
// drive Z: is the root).
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// TestLeftoversThroughNamedPipe: the Windows eraser command, reaching a
// real containerd through a named pipe, reads containerd's records through
// its API clients as the Linux command does through the socket: "node list
// --leftovers" lists the same leftovers of every kind (testleftovers.Make)
// with the same bytes. "node prune --reclaim" removes an image, tells what
// it should free from the records, and reclaims (on a dry run, would
// reclaim) the image named only by its ID, the image of namespace default
// and the old lease, with the sweep of containerd's stores; a listing
// afterwards shows them gone, and the images the re-checks keep (one a
// container uses, one the runtime pins, one an exclusion names) and the
// garbage-collection root still there.
func TestLeftoversThroughNamedPipe(t *testing.T) {
	requireWine(t)
	c := testcontainerd.Start(t)
	dir := t.TempDir()
	bin := build(t)
	ln := testleftovers.New(t, c)
	made := testleftovers.Make(t, ln)
	image := func(tag string, size int) testimage.Image {
		return testimage.Image{Tags: []string{tag}, Files: map[string][]byte{"pause": testimage.Pause(t)}, Entrypoint: []string{"/pause"}, RandomBytes: size}
	}
	inUse := ln.IDOnly(t, image("example.com/windows/in-use:1", 1*mib))
	ln.RunContainer(t, "in-use", inUse)
	pinned := ln.IDOnly(t, image("example.com/windows/pinned:1", 1*mib))
	ln.Pin(t, pinned)
	excluded := ln.IDOnly(t, image("example.com/windows/excluded:1", 1*mib))
	const junk = "example.com/windows/junk:1"
	ln.Import(t, testimage.Image{Tags: []string{junk}, RandomBytes: 2 * mib})
	// What the imports left for the next collection goes now, so that
	// the listings compared see the same records.
	ln.Collect(t)

	n := node{t: t, bin: bin, socket: c.Socket, stateDir: filepath.Join(dir, "state"), excludeTo: filepath.Join(dir, "exclude.json")}
	if err := os.WriteFile(n.excludeTo, []byte(`{"excluded": ["`+excluded+`"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	n.pipe = pipeRelay(t, bin.relayExe, relayToUnix(t, c.Socket))

	found := n.same()
	for _, problem := range made.Missing(found) {
		t.Error(problem)
	}
	for _, id := range []string{inUse, pinned, excluded} {
		if _, ok := testleftovers.Find(found, leftoverkind.UnnamedImage, id); !ok {
			t.Errorf("no unnamed-image leftover %s", id)
		}
	}
	if t.Failed() {
		t.Fatalf("listed through the named pipe: %+v", found)
	}

	// Reclaimed: the cut image, the image of default, the lease; kept by
	// the re-checks: three images; listed only: the root.
	const reclaimed, left = 3, 4
	minBytes := uint64(2*3*mib + 2*2*mib + 1*mib)
	check := func(po nodecmd.PruneOutput, dryRun bool) {
		t.Helper()
		l := po.Summary.Leftovers
		if l == nil || l.Error != "" || l.Failed != 0 || l.Reclaimed < reclaimed || l.Found != left || l.ReclaimedBytes < minBytes {
			t.Errorf("prune (dry run: %v) reports leftovers %+v; want at least %d reclaimed of at least %d bytes, %d left, none failed", dryRun, l, reclaimed, minBytes, left)
		}
		var removed bool
		for _, r := range po.Results {
			removed = removed || (r.Target == junk && r.Outcome == "removed")
		}
		if !removed {
			t.Errorf("prune (dry run: %v) did not remove %s: %+v", dryRun, junk, po.Results)
		}
		// The junk image's blob and snapshot, from the records read
		// through the pipe.
		if f := po.Summary.Freed; f == nil || f.Error != "" || f.ExpectedBytes < 2*2*mib {
			t.Errorf("prune (dry run: %v): freed %+v, want at least %d bytes expected from the runtime's records", dryRun, f, 2*2*mib)
		}
	}
	check(n.prune(junk, true), true)
	if after := n.same(); !cmp.Equal(found, after, cmpopts.IgnoreFields(leftover.Leftover{}, "Why")) {
		t.Errorf("a dry run changed the leftovers: %+v, then %+v", found, after)
	}
	check(n.prune(junk, false), false)

	after := n.same()
	for _, gone := range []struct {
		kind leftoverkind.Kind
		name string
	}{{leftoverkind.UnnamedImage, made.UnnamedID}, {leftoverkind.OtherNamespace, made.OtherNamespace}, {leftoverkind.OldLease, made.Lease}} {
		if l, ok := testleftovers.Find(after, gone.kind, gone.name); ok {
			t.Errorf("after reclaiming, %s %s is still there: %+v", gone.kind, gone.name, l)
		}
	}
	for _, kept := range []struct {
		kind leftoverkind.Kind
		name string
	}{{leftoverkind.UnnamedImage, inUse}, {leftoverkind.UnnamedImage, pinned}, {leftoverkind.UnnamedImage, excluded}, {leftoverkind.GCRoot, made.Root}} {
		if _, ok := testleftovers.Find(after, kept.kind, kept.name); !ok {
			t.Errorf("after reclaiming, %s %s is gone: the re-check or the policy keeps it", kept.kind, kept.name)
		}
	}
	if _, ok := c.ImageIDs(t)[made.Kept]; !ok {
		t.Errorf("the kubelet's image %s is gone", made.Kept)
	}
}
