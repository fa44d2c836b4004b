//go:build !windows

package handoff

// Default is the transport this platform's workers use.
func Default() Transport { return FIFO{} }

// Available lists every transport that runs on this platform.
func Available() []Transport { return []Transport{FIFO{}, Socket{}} }
