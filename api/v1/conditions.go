package v1

// Condition types and reasons shared by ImageList and ImageJob status.
const (
	// ConditionReady is True when the last run for the current generation
	// finished and met the success ratio, False when it failed, and Unknown
	// while a run is in progress.
	ConditionReady = "Ready"

	// ReasonRunning: a run for the current generation is in progress.
	ReasonRunning = "Running"
	// ReasonSucceeded: the last run met the success ratio.
	ReasonSucceeded = "Succeeded"
	// ReasonFailed: the last run did not meet the success ratio.
	ReasonFailed = "Failed"
	// ReasonPending: a run is waiting for an earlier one to finish.
	ReasonPending = "Pending"
	// ReasonTooLarge: the ImageList's entries and the configuration do not
	// fit in the job's ConfigMap; no job was created for this generation.
	ReasonTooLarge = "TooLarge"
)
