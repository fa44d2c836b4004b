// Package bytesize formats byte counts for people, in binary units, as the
// command-line tools and the workers' logs print them.
package bytesize

import "fmt"

// Format is n as "512B", "1.5KiB", "67.2MiB", ...
func Format(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// FormatSigned is Format of a count that may be negative (a filesystem
// that grew where it should have shrunk): "-1.5MiB".
func FormatSigned(n int64) string {
	if n < 0 {
		return "-" + Format(uint64(-n))
	}
	return Format(uint64(n))
}
