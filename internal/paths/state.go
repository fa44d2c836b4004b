package paths

// StateDir is the node directory that keeps the workers' state across runs
// (internal/nodestate): a hostPath on Linux nodes, seen directly by
// HostProcess pods on Windows nodes.
func StateDir(os OS) string {
	if os == Windows {
		return `C:\ProgramData\eraser`
	}
	return "/var/lib/eraser"
}
