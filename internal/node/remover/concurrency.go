package remover

import (
	"runtime"
	"runtime/metrics"

	"github.com/eraser-oss/eraser/internal/process/memlimit"
)

// Memory figures behind the automatic concurrency, measured with the
// release build (make bench-remover): besides its heap, the process needs
// about 12 MiB (its code, the Go runtime, the page cache of the node state
// file it writes), and each removal in flight about 14 KiB.
const (
	nonHeapMemory = 12 << 20
	memoryPerCall = 16 << 10
	// minConcurrency keeps removals moving when the node's images leave
	// little room: the re-check group.
	minConcurrency = RecheckGroup
)

// AutoConcurrency is how many removals to issue at once: as many as fit in
// the container's memory limit (cgroup v2 or v1) beside what the run
// already holds, up to DefaultConcurrency. It is decided after the node is
// read and the plan made, because the images of a large node (tens of
// thousands) take more of a small limit than the removals in flight.
// Without a limit it is DefaultConcurrency.
func AutoConcurrency() int {
	limit := memlimit.Limit()
	if limit <= 0 {
		return DefaultConcurrency
	}
	// What the plan left live, not what the listings did.
	runtime.GC()
	return concurrencyFor(limit, liveHeap())
}

// concurrencyFor fits the removals in limit beside a live heap of live
// bytes, which the collector may let grow by a quarter before it runs.
func concurrencyFor(limit int64, live uint64) int {
	if limit <= 0 {
		return DefaultConcurrency
	}
	n := int((limit - nonHeapMemory - int64(live+live/4)) / memoryPerCall)
	return max(minConcurrency, min(DefaultConcurrency, n))
}

// liveHeap is the heap the last garbage collection left live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
