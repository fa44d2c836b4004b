//go:build linux

package memlimit

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// PeakRSS is this process's peak resident memory (VmHWM) in bytes, so that
// operators can size the worker's memory limit from real runs.
func PeakRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}
