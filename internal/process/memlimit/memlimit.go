// Package memlimit tells the Go runtime the memory limit of the container it
// runs in, so that the collector works harder as the limit nears instead of
// letting the heap double past it and the kernel kill the process; and it
// measures the process's peak memory, which the workers' summaries report.
package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Limit is the memory limit of this process's cgroup (v2 or v1), or
// 0 when there is none. The cgroup is looked up by /proc/self/cgroup first
// (a process placed in a cgroup on a host), then at the root of the
// cgroup mount, which is the container's own cgroup inside a container.
func Limit() int64 {
	var files []string
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || parts[2] == "/" {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				files = append(files, filepath.Join("/sys/fs/cgroup", parts[2], "memory.max"))
			case slices.Contains(strings.Split(parts[1], ","), "memory"):
				files = append(files, filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			}
		}
	}
	files = append(files, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 reports "no limit" as a huge page-aligned number.
		if err != nil || n <= 0 || n > 1<<50 {
			return 0
		}
		return n
	}
	return 0
}

// softLimit is the share of the container's memory limit the Go runtime is
// told to keep to: the rest is for what the runtime does not count (stacks
// of the streams in flight, the binary's pages).
const softLimit = 0.7

// Apply tells the Go runtime the container's memory limit (unless
// GOMEMLIMIT does): a node with tens of thousands of images brings a worker
// with a 30Mi limit close, and the manager's informer caches grow with the
// cluster.
func Apply() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit := Limit(); limit > 0 {
		debug.SetMemoryLimit(int64(float64(limit) * softLimit))
	}
}
