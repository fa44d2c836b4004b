package remover

import (
	"os"
	"strconv"
	"strings"
)

// Memory figures behind the automatic concurrency, measured with the
// release build (make bench-remover): the process needs about 12 MiB before
// it removes anything, and each removal in flight about 14 KiB.
const (
	baseMemory     = 16 << 20 // with margin
	memoryPerCall  = 16 << 10
	minConcurrency = 64
)

// AutoConcurrency is how many removals to issue at once: as many as fit in
// the container's memory limit (cgroup v2 or v1), up to DefaultConcurrency.
// Without a limit it is DefaultConcurrency.
func AutoConcurrency() int {
	return concurrencyFor(cgroupMemoryLimit())
}

func concurrencyFor(limit int64) int {
	if limit <= 0 {
		return DefaultConcurrency
	}
	n := int((limit - baseMemory) / memoryPerCall)
	return max(minConcurrency, min(DefaultConcurrency, n))
}

// cgroupMemoryLimit is the memory limit of this process's cgroup, or 0.
func cgroupMemoryLimit() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
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
