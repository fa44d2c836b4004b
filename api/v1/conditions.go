package v1

// Condition types of ImageList and ImageJob status; their reasons are in
// reasons.go.
const (
	// ConditionReady is True when the last run for the current generation
	// finished and met the success ratio, False when it failed, and Unknown
	// while a run is in progress.
	ConditionReady = "Ready"
	// ConditionVulnerabilityDB is on a scanning ImageJob whose scanners get
	// their DB from the manager: True with the DB the run judges with, or
	// False with why the run has none (its scanners then judge nothing).
	ConditionVulnerabilityDB = "VulnerabilityDB"
)
