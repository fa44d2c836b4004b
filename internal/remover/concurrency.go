package remover

import "github.com/eraser-oss/eraser/internal/worker"

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
	return concurrencyFor(worker.MemoryLimit())
}

func concurrencyFor(limit int64) int {
	if limit <= 0 {
		return DefaultConcurrency
	}
	n := int((limit - baseMemory) / memoryPerCall)
	return max(minConcurrency, min(DefaultConcurrency, n))
}
