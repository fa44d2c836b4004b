//go:build !linux

package memlimit

// PeakRSS is not measured on this platform.
func PeakRSS() uint64 { return 0 }
