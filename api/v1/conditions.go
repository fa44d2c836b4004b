package v1

// Condition types and reasons shared by ImageList and ImageJob status.
const (
	// ConditionReady is True when the last run for the current generation
	// finished and met the success ratio, False when it failed, and Unknown
	// while a run is in progress.
	ConditionReady = "Ready"
	// ConditionVulnerabilityDB is on a scanning ImageJob whose scanners get
	// their DB from the manager: True with the DB the run judges with, or
	// False with why the run has none (its scanners then judge nothing).
	ConditionVulnerabilityDB = "VulnerabilityDB"

	// ReasonRunning: a run for the current generation is in progress.
	ReasonRunning = "Running"
	// ReasonSucceeded: the last run met the success ratio.
	ReasonSucceeded = "Succeeded"
	// ReasonFailed: the last run did not meet the success ratio.
	ReasonFailed = "Failed"
	// ReasonPending: a run is waiting for an earlier one to finish.
	ReasonPending = "Pending"
	// ReasonQueued: the run is going, and some of its nodes wait for
	// another run's worker on them to finish (one worker per node).
	ReasonQueued = "Queued"
	// ReasonTooLarge: the ImageList's entries and the configuration do not
	// fit in the job's ConfigMap; no job was created for this generation.
	ReasonTooLarge = "TooLarge"
	// ReasonRunDeleted: the current generation's ImageJob was deleted
	// before it finished, which stops the run; it is not started again
	// until the spec changes or eraser.sh/run-now asks for it.
	ReasonRunDeleted = "RunDeleted"
	// ReasonJobConflict: an object of the run's name (the job, its data or
	// a worker pod) belongs to another run, left over from it; the run
	// waits for the garbage collector to delete it, and never uses it.
	ReasonJobConflict = "JobConflict"
	// ReasonFailureBudgetExceeded: more nodes failed than
	// manager.imageJob.maxFailedNodes allows, so the run created no more
	// worker pods and ended Failed; the nodes it never reached count as
	// skipped, untouched.
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	// ReasonUpstreamRan: the ImageList was there when this Eraser was
	// installed, and upstream Eraser had already run it (its status has
	// upstream's results): it is not run again until its spec is edited or
	// eraser.sh/run-now asks for it.
	ReasonUpstreamRan = "UpstreamRan"
	// ReasonNotRunOnAdoption: the ImageList was there when this Eraser was
	// installed, under a name upstream Eraser ignored (it ran only the list
	// named imagelist): it is not run until its spec is edited or
	// eraser.sh/run-now asks for it.
	ReasonNotRunOnAdoption = "NotRunOnAdoption"
)
