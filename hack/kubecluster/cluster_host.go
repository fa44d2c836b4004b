//go:build linux

// What the cluster changes on the host (sysctls, mount points, its state lock) and its teardown.

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

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
// private ones on, recording those it created so the teardown removes them:
// the topmost missing one of each path, so that nothing it made is left.
func makeMountPoints(state string, nodes []node) error {
	var created []string
	seen := map[string]bool{}
	for _, n := range nodes {
		for _, b := range n.binds() {
			if seen[b.dst] {
				continue
			}
			seen[b.dst] = true
			top := ""
			for p := b.dst; p != "/" && p != "."; p = filepath.Dir(p) {
				if _, err := os.Stat(p); err == nil {
					break
				}
				top = p
			}
			if top == "" {
				continue
			}
			if err := os.MkdirAll(b.dst, 0o755); err != nil {
				return err
			}
			created = append(created, top)
		}
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
			if k := killStragglers(strings.TrimSpace(string(ns)), filepath.Join(state, n), state); k > 0 {
				logf("%s: killed %d leftover process(es)", n, k)
			}
			// A CRI-O node's pods and conmons (none, when it stopped in
			// order); containerd nodes have no such file.
			if left := removeNodeCgroup(filepath.Join(state, n)); len(left) > 0 {
				logf("%s: cgroups left: %v", n, left)
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
