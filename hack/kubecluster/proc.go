//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a process this program started and recorded in a pid file, so that
// "kubecluster down" can stop it after the program itself was killed.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// start runs a command with its output in logs/NAME.log, in a process group
// of its own (a Ctrl-C on the terminal reaches only this program, which then
// stops everything in order), and records its pid.
func start(state, name string, attr *syscall.SysProcAttr, bin string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(state, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid = true
	// If this program dies without its teardown, its children get a chance
	// to run theirs.
	attr.Pdeathsig = syscall.SIGTERM
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.exited)
	}()
	if err := writePidFile(state, name, cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// pidFile records a pid with the process's start time, so that a pid reused
// by an unrelated process is never signalled.
func writePidFile(state, name string, pid int) error {
	st, err := startTime(pid)
	if err != nil {
		return fmt.Errorf("recording %s: %w", name, err)
	}
	return os.WriteFile(filepath.Join(state, "pids", name+".pid"), []byte(fmt.Sprintf("%d %d\n", pid, st)), 0o644)
}

type pidRecord struct {
	name  string
	pid   int
	start uint64
}

func readPidFile(path string) (pidRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pidRecord{}, err
	}
	var r pidRecord
	r.name = strings.TrimSuffix(filepath.Base(path), ".pid")
	if _, err := fmt.Sscanf(string(b), "%d %d", &r.pid, &r.start); err != nil {
		return pidRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// startTime is field 22 of /proc/PID/stat, in clock ticks since boot.
func startTime(pid int) (uint64, error) {
	_, st, err := procStat(pid)
	return st, err
}

func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0][0], start, err
}

// alive tells whether the recorded process still runs (a zombie does not).
func (r pidRecord) alive() bool {
	state, st, err := procStat(r.pid)
	return err == nil && st == r.start && state != 'Z'
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs the process.
func (r pidRecord) stop(grace time.Duration) {
	if !r.alive() {
		return
	}
	_ = syscall.Kill(r.pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for r.alive() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if r.alive() {
		logf("%s (pid %d) did not stop in %s; killing it", r.name, r.pid, grace)
		_ = syscall.Kill(r.pid, syscall.SIGKILL)
		for i := 0; i < 100 && r.alive(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// mountNamespace is the mount namespace of a process, e.g. "mnt:[4026532301]".
func mountNamespace(pid int) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
}

// killStragglers SIGKILLs what a node leaves when it is not stopped in order:
// processes in the node's mount namespace (containerd shims outlive
// containerd by design) and container processes whose root is under the
// state directory.
//
// A namespace's number is reused once the namespace is freed, which it is
// when the node stops in order; another program's brand-new container
// (runc init) can then carry the recorded number. So a process counts as in
// the node's namespace only while it also sees the node's own bind of
// nodeDir/kubelet on /var/lib/kubelet, which no other namespace has.
func killStragglers(mntns, nodeDir, state string) int {
	self := os.Getpid()
	n := 0
	var nodeKubelet os.FileInfo
	if mntns != "" {
		nodeKubelet, _ = os.Stat(filepath.Join(nodeDir, kubeletBind.src))
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		inNS := false
		if nodeKubelet != nil {
			if ns, err := mountNamespace(pid); err == nil && ns == mntns {
				// /proc/PID/root resolves in that process's namespace.
				seen, err := os.Stat(fmt.Sprintf("/proc/%d/root%s", pid, kubeletBind.dst))
				inNS = err == nil && os.SameFile(seen, nodeKubelet)
			}
		}
		inState := false
		if state != "" {
			root, _ := os.Readlink(fmt.Sprintf("/proc/%d/root", pid))
			inState = strings.HasPrefix(root, state+"/")
		}
		if inNS || inState {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[kubecluster %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
