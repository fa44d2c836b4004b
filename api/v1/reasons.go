package v1

// Every reason a user meets on an ImageList, an ImageJob, a node's entry in
// a job's status or report, or an Event, grouped by what carries it. A
// reason carried by more than one names them all in its comment.

// Reasons of the Ready condition of both ImageList and ImageJob.
const (
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
	// ReasonPaused: the pause switch holds the run (or, as an Event on the
	// schedule's ConfigMap, the scheduled runs).
	ReasonPaused = "Paused"
)

// Reasons of the Ready condition of an ImageList; TooLarge, RunDeleted and
// JobConflict are Events on the list too.
const (
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

// Reasons of the Ready condition of an ImageJob that failed as a whole,
// beside the failures of its nodes; each is an Event on the job too.
const (
	// ReasonFailureBudgetExceeded: more nodes failed than
	// manager.imageJob.maxFailedNodes allows, so the run created no more
	// worker pods and ended Failed; the nodes it never reached count as
	// skipped, untouched.
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	// ReasonPodsRefused: the API server refused every worker pod.
	ReasonPodsRefused = "PodsRefused"
	// ReasonReferencesNotSynced: the job's wave waited for the reference
	// index longer than podStartTimeout.
	ReasonReferencesNotSynced = "ReferencesNotSynced"
	// ReasonConfigMissing: the job's ConfigMap is gone or unreadable.
	ReasonConfigMissing = "ConfigMissing"
	// ReasonNodesMissing: the job's node list is gone or unreadable.
	ReasonNodesMissing = "NodesMissing"
	// ReasonInvalidJobData: the job's ConfigMap does not parse.
	ReasonInvalidJobData = "InvalidJobData"
	// ReasonInvalidNodeFilter: the job's node filter does not parse.
	ReasonInvalidNodeFilter = "InvalidNodeFilter"
	// ReasonInvalidPodSpec: no worker pod can be built from the job's
	// configuration.
	ReasonInvalidPodSpec = "InvalidPodSpec"
)

// Reasons of the VulnerabilityDB condition of a scanning ImageJob.
const (
	// ReasonDBFetched: the run judges with the DB the message names.
	ReasonDBFetched = "Fetched"
	// ReasonDBFetchTimedOut: no DB came within dbDownloadTimeout.
	ReasonDBFetchTimedOut = "FetchTimedOut"
	// ReasonDBRateLimited: the DB's repository refused the download for
	// its rate limit.
	ReasonDBRateLimited = "RateLimited"
	// ReasonDBFetchFailed: fetching the DB failed otherwise.
	ReasonDBFetchFailed = "FetchFailed"
)

// Reasons a node failed, in an ImageJob's status.failedNodes and the
// job's per-node report.
const (
	// ReasonPodFailed: a container failed, or the pod did, otherwise.
	ReasonPodFailed = "PodFailed"
	// ReasonRemovalsFailed: the remover ran, but removals it was asked for
	// failed (the runtime erred or restarted); the message counts them.
	ReasonRemovalsFailed = "RemovalsFailed"
	// ReasonStartTimeout: the worker pod did not start within
	// podStartTimeout.
	ReasonStartTimeout = "StartTimeout"
	// ReasonRunTimeout: the worker pod did not finish within its run
	// timeout.
	ReasonRunTimeout = "RunTimeout"
	// ReasonNodeDeleted: the node was deleted during the run.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonPodDeleted: the worker pod was deleted before it finished.
	ReasonPodDeleted = "PodDeleted"
	// ReasonPodMissing: the worker pod the run created is not there.
	ReasonPodMissing = "PodMissing"
	// ReasonCreateFailed: the API server did not create the pod within the
	// start timeout; the message has its last answer. An Event on the job
	// too.
	ReasonCreateFailed = "CreateFailed"
	// ReasonNotAdmitted: the node's kubelet refused the worker pod at
	// admission (OutOfcpu, OutOfmemory, ...), and each pod recreated with
	// backoff within the start timeout too; the message has its last words.
	ReasonNotAdmitted = "NotAdmitted"
	// ReasonWaitTimedOut: the node waited for another run's worker that
	// could not end, longer than nodeWaitTimeout; no worker of this run was
	// created on it.
	ReasonWaitTimedOut = "WaitTimedOut"
)

// Reasons a node was left out of an ImageJob (its status message and
// report count the skipped nodes by reason).
const (
	// ReasonFiltered: the node filter leaves the node out.
	ReasonFiltered = "Filtered"
	// ReasonCleanupFilter: the node carries the cleanup-filter label of an
	// exclude filter.
	ReasonCleanupFilter = "CleanupFilter"
	// ReasonNotReady: the node is not Ready.
	ReasonNotReady = "NotReady"
	// ReasonUnsupportedOS: no worker runs on the node's operating system.
	ReasonUnsupportedOS = "UnsupportedOS"
	// ReasonNoWindowsScanner: Trivy cannot scan Windows images; a scheduled
	// run with the scanner on skips Windows nodes unless a Windows scanner
	// image is configured, so they never lose more than Linux nodes would.
	ReasonNoWindowsScanner = "NoWindowsScanner"
	// ReasonNodeSelector: the node lacks a label of
	// manager.imageJob.nodeSelector.
	ReasonNodeSelector = "NodeSelector"
	// ReasonTainted: the node has a NoSchedule or NoExecute taint that
	// manager.imageJob.tolerations do not tolerate. Worker pods are bound
	// with nodeName, past the scheduler: the kubelet would still run one on
	// a NoSchedule node, and on a NoExecute one the pod would be refused or
	// evicted; so the choice the scheduler would have made is made here.
	ReasonTainted = "Tainted"
)

// Reasons of Events only, beside the condition reasons above that are
// Events too. An ImageJob's and an ImageList's Events also report the job's
// phase: the job's as the phase itself, the list's as "Job" and the phase.
const (
	// ReasonJobCreated: on an ImageList, its run's ImageJob was created.
	ReasonJobCreated = "JobCreated"
	// ReasonJobNotCreated: on an ImageList, creating its run's ImageJob
	// failed.
	ReasonJobNotCreated = "JobNotCreated"
	// ReasonEntriesDropped: on an ImageList, some of its entries were left
	// out of its run for their length.
	ReasonEntriesDropped = "EntriesDropped"
	// ReasonRunNow: on an object annotated eraser.sh/run-now, the request
	// started a job.
	ReasonRunNow = "RunNow"
	// ReasonRunNowRefused: on an object annotated eraser.sh/run-now, the
	// request was dropped, not queued.
	ReasonRunNowRefused = "RunNowRefused"
	// ReasonScheduled: on a scheduled ImageJob, the schedule created it.
	ReasonScheduled = "Scheduled"
	// ReasonScheduleStateTooLarge: on the schedule's ConfigMap, its state
	// was written without its per-node record.
	ReasonScheduleStateTooLarge = "ScheduleStateTooLarge"
	// ReasonStarted: on an ImageJob, the run chose its nodes.
	ReasonStarted = "Started"
	// ReasonNodeFailed: on an ImageJob, nodes failed; the message names
	// them.
	ReasonNodeFailed = "NodeFailed"
	// ReasonReferencesIncomplete: on an ImageJob, its wave was given a
	// cluster set without some of its references: its workers keep every
	// image from the automatic policies.
	ReasonReferencesIncomplete = "ReferencesIncomplete"
	// ReasonVulnerabilityDBUnavailable: on a scanning ImageJob, its
	// scanners have no DB.
	ReasonVulnerabilityDBUnavailable = "VulnerabilityDBUnavailable"
	// ReasonReportDropped: on an ImageJob deleted with its report before
	// keepReportFor, to keep all reports within their bound.
	ReasonReportDropped = "ReportDropped"
	// ReasonLegacyExclusion: on an exclusion-list ConfigMap, the workers
	// read an entry or field of the list differently from upstream Eraser;
	// it still protects at least what it did there.
	ReasonLegacyExclusion = "LegacyExclusionEntry"
	// ReasonUnreadableExclusionList: on an exclusion-list ConfigMap, the key
	// upstream read holds no list; every node's worker fails on it, as
	// upstream's did, and removes nothing.
	ReasonUnreadableExclusionList = "UnreadableExclusionList"
	// ReasonImageDropped: on a pod or workload, one of its images was left
	// out of the reference index for its length.
	ReasonImageDropped = "ImageDropped"
)

// Reasons of Events on the EraserConfig ConfigMap and on the CRDs: the
// configuration in force, and what holds a manager back from running its
// controllers.
const (
	// ReasonConfigApplied: on the EraserConfig ConfigMap, its document is
	// in force for the next jobs.
	ReasonConfigApplied = "ConfigApplied"
	// ReasonInvalidConfig: on the EraserConfig ConfigMap, its document was
	// refused and the last good one stays in force; or, with none to fall
	// back on, the manager is held back until the document is fixed.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonMissingFields: on a CRD, it lacks fields the manager writes,
	// which the API server would drop; the manager is held back until the
	// CRD is this release's.
	ReasonMissingFields = "MissingFields"
	// ReasonOtherManager: on the EraserConfig ConfigMap, another Eraser
	// manager acts on the same CRDs; the manager is held back until it is
	// gone.
	ReasonOtherManager = "OtherEraserManager"
)
