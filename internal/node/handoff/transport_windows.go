//go:build windows

package handoff

// Default is the transport this platform's workers use: Windows has no FIFOs.
func Default() Transport { return Socket{} }

// Available lists every transport that runs on this platform.
func Available() []Transport { return []Transport{Socket{}} }
