//go:build linux && bench

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memoryCgroup is a memory cgroup with a limit, for running a worker as its
// pod's limit would hold it: the kernel kills it if it goes over.
type memoryCgroup struct {
	dir string
	v2  bool
}

// newMemoryCgroup makes a cgroup limited to limit bytes (v2 if mounted,
// else v1's memory controller), or skips the measurement's row when this
// machine has neither writable (it fails under CI).
func newMemoryCgroup(t *testing.T, limit int64) *memoryCgroup {
	t.Helper()
	name := fmt.Sprintf("eraser-bench-%d", os.Getpid())
	for _, c := range []memoryCgroup{{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}, {dir: filepath.Join("/sys/fs/cgroup/memory", name)}} {
		if c.v2 {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
				continue
			}
		} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
			continue
		}
		if err := os.Mkdir(c.dir, 0o755); err != nil {
			continue
		}
		cg := c
		t.Cleanup(func() { _ = os.Remove(cg.dir) })
		file := "memory.limit_in_bytes"
		if cg.v2 {
			file = "memory.max"
		}
		if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
			t.Fatalf("setting the memory limit: %v", err)
		}
		if !cg.v2 {
			// No swap to hide an overrun in.
			_ = os.WriteFile(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644)
		}
		return &cg
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no writable memory cgroup")
	}
	t.Log("no writable memory cgroup: the in-limit row is left out")
	return nil
}

// command runs binary with args inside the cgroup: a shell joins it, then
// becomes the binary.
func (c *memoryCgroup) command(binary string, args ...string) *exec.Cmd {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && exec %s %s", c.dir, binary, strings.Join(quoted, " "))
	return exec.Command("sh", "-c", script)
}

// peak is the cgroup's peak memory use in bytes (page cache included).
func (c *memoryCgroup) peak() int64 {
	file := "memory.max_usage_in_bytes"
	if c.v2 {
		file = "memory.peak"
	}
	data, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}
