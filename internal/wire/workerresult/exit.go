package workerresult

// Exit codes of the node workers. The manager fails a node on any non-zero
// exit and shows the summary's Error; it reads ExitNodeFailed from the
// remover as failed removals rather than a pod that failed, so the codes are
// a contract between the two sides, defined here alone.
const (
	// ExitOK: the run completed; images kept for a reason are not failures.
	ExitOK = 0
	// ExitCouldNotRun: the worker could not do its job at all (bad input,
	// no runtime, an unreadable exclusion list, a peer that never came).
	ExitCouldNotRun = 1
	// ExitNodeFailed: the run completed, but removals the node was asked
	// for failed.
	ExitNodeFailed = 2
)
