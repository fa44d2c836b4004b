package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobPhase is where an ImageJob is in its life.
// +kubebuilder:validation:Enum=Running;Completed;Failed
type JobPhase string

const (
	// PhaseRunning: worker pods are being created or are still running.
	PhaseRunning JobPhase = "Running"
	// PhaseCompleted: every node finished and the success ratio was met.
	PhaseCompleted JobPhase = "Completed"
	// PhaseFailed: every node finished and the success ratio was not met,
	// or the job could not run at all.
	PhaseFailed JobPhase = "Failed"
)

// MaxReportedNodes bounds the per-node entries an ImageJob status carries, so
// that its size stays small on clusters of thousands of nodes; the counters
// always cover every node.
const MaxReportedNodes = 32

// ImageJobStatus reports one run of node workers across the cluster.
type ImageJobStatus struct {
	// Desired is the number of nodes the job was meant to run on, skipped
	// nodes included (as upstream Eraser counts it).
	// +optional
	Desired int `json:"desired"`

	// Succeeded is the number of nodes whose worker pod succeeded.
	// +optional
	Succeeded int `json:"succeeded"`

	// Failed is the number of nodes whose worker pod failed, timed out, or
	// whose node went away during the run.
	// +optional
	Failed int `json:"failed"`

	// Skipped is the number of nodes left out: by the node filter or the
	// node selector, for a taint the workers do not tolerate, for not being
	// Ready, or for having no worker for their OS.
	// +optional
	Skipped int `json:"skipped"`

	// Started is the number of eligible nodes the waves reached: their
	// worker pod has been created, or it waits for another run's worker on
	// the node to finish (Waiting). With waves it grows as earlier pods
	// finish.
	// +optional
	Started int `json:"started,omitempty"`

	// Waiting is the number of reached nodes whose worker pod is not
	// created yet because another run's worker is on the node (one worker
	// per node, cluster-wide) or is queued for it first.
	// +optional
	Waiting int `json:"waiting,omitempty"`

	// WaitingIndexes are those nodes, as ranges of indexes into the job's
	// node list ("0-3,7"), so that a restarted manager knows them.
	// +optional
	WaitingIndexes string `json:"waitingIndexes,omitempty"`

	// QueuedBehind is the run (an ImageJob's name) the first waiting node
	// waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	QueuedBehind string `json:"queuedBehind,omitempty"`

	// Phase is Running until every node finished, then Completed or Failed.
	// +optional
	Phase JobPhase `json:"phase,omitempty"`

	// DeleteAfter is when the finished job's pods and ConfigMaps are removed
	// (manager.imageJob.cleanup.delayOnSuccess / delayOnFailure), once its
	// report has been read from them; the job itself goes then too, or at
	// report.deleteAfter when that is later (keepReportFor).
	// +optional
	DeleteAfter *metav1.Time `json:"deleteAfter,omitempty"`

	// ObservedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StartTime is when the job started creating worker pods.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the last node finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Conditions describe the job's current state; see the ImageJob
	// condition types in this package.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Results totals the per-image outcomes the node workers reported.
	// +optional
	Results *ImageResults `json:"results,omitempty"`

	// FailedNodes names some of the nodes that failed and why; at most
	// MaxReportedNodes entries, Failed has the full count.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=32
	FailedNodes []NodeFailure `json:"failedNodes,omitempty"`

	// FailedIndexes records every failed node, by reason, as ranges of
	// indexes into the job's node list (ConfigMap <job>-nodes), such as
	// "0-3,7": FailedNodes names only some, and a manager that restarts
	// mid-job keeps every failure's reason from this, rather than judging
	// again a node whose pod is gone.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	FailedIndexes map[string]string `json:"failedIndexes,omitempty"`

	// Report points to the per-node report: what each node removed, kept
	// (and why) and failed to remove, read from the workers' logs before
	// their pods are deleted.
	// +optional
	Report *ReportRef `json:"report,omitempty"`
}

// MaxReportConfigMaps bounds the ConfigMaps a report is sharded into; with
// shards of at most 900 KiB that caps a report at about 56 MiB, however
// many nodes and images a job has (see docs/report.md).
const MaxReportConfigMaps = 64

// ReportRef says where a job's per-node report is, for kubectl and for
// `kubectl eraser report`.
type ReportRef struct {
	// Namespace holds the report's ConfigMaps (the manager's namespace).
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// Selector is the label selector of the report's ConfigMaps:
	// kubectl get configmap -n <namespace> -l <selector>.
	// +kubebuilder:validation:MaxLength=128
	Selector string `json:"selector"`

	// ConfigMaps name the report's shards, each holding whole nodes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	ConfigMaps []string `json:"configMaps,omitempty"`

	// Nodes is the number of nodes the report covers so far.
	// +optional
	Nodes int `json:"nodes,omitempty"`

	// OmittedNodes counts the nodes left out of the report because it
	// reached MaxReportConfigMaps shards; the job's counters include them.
	// +optional
	OmittedNodes int `json:"omittedNodes,omitempty"`

	// Complete is set once every node that ran is in the report (those
	// whose logs could not be read included, with the reason).
	// +optional
	Complete bool `json:"complete,omitempty"`

	// DeleteAfter is when the finished job and its report are deleted
	// (manager.imageJob.cleanup.keepReportFor after the job finished, and
	// never before the pods are).
	// +optional
	DeleteAfter *metav1.Time `json:"deleteAfter,omitempty"`
}

// NodeFailure says why the job failed on one node.
type NodeFailure struct {
	// Node is the node's name.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`

	// Reason is a CamelCase word: PodFailed, Timeout, NodeDeleted, ...
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`

	// Message is a short human-readable explanation.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// ImageResults totals per-image outcomes reported by the node workers. On a
// dry run, Removed and BytesFreed count what would have been removed.
type ImageResults struct {
	// Removed images were deleted from a node.
	// +optional
	Removed int64 `json:"removed,omitempty"`
	// InUse images were kept because a container uses them.
	// +optional
	InUse int64 `json:"inUse,omitempty"`
	// Pinned images were kept because the runtime pins them or they are its
	// sandbox image.
	// +optional
	Pinned int64 `json:"pinned,omitempty"`
	// Excluded images were kept because an exclusion list protects them.
	// +optional
	Excluded int64 `json:"excluded,omitempty"`
	// NotOnNode entries named no image present on the node.
	// +optional
	NotOnNode int64 `json:"notOnNode,omitempty"`
	// Failed removals returned an error from the runtime that a later run
	// may get past (the runtime down or restarting, a timeout).
	// +optional
	Failed int64 `json:"failed,omitempty"`
	// Refused images are ones the runtime would not remove for good: it
	// refused with a code a retry does not change, or answered that it
	// removed the image and still listed it. They do not fail their node.
	// +optional
	Refused int64 `json:"refused,omitempty"`
	// BytesFreed is the size of the removed images as the runtime reported it.
	// +optional
	BytesFreed int64 `json:"bytesFreed,omitempty"`
	// ExpectedBytesFreed is what only the removed images held, by the
	// runtimes' own records: a layer several of them shared counted once,
	// one an image left on the node still holds not at all.
	// +optional
	ExpectedBytesFreed int64 `json:"expectedBytesFreed,omitempty"`
	// MeasuredBytesFreed is what the nodes' image filesystems gained (the
	// runtimes' records, where a worker cannot see the filesystem). Not
	// set on a dry run.
	// +optional
	MeasuredBytesFreed int64 `json:"measuredBytesFreed,omitempty"`
	// Freed is the space the removals freed (would free, on a dry run), for
	// people, as "4.0MiB": each node's measured gain where it measured one,
	// else what only its removed images held, else their size as the
	// runtime reported it, summed over the nodes. The per-node report
	// (kubectl eraser report) gives the same figure.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Freed string `json:"freed,omitempty"`
	// FreedMismatches counts the nodes where the two differ by more than
	// the tolerance (5%, at least 4 MiB); each node's report says why.
	// +optional
	FreedMismatches int64 `json:"freedMismatches,omitempty"`
	// TooYoung images were kept because they were pulled (or re-tagged) on
	// the node less than the retention policy's minAge ago.
	// +optional
	TooYoung int64 `json:"tooYoung,omitempty"`
	// RecentlyUsed images were kept because a container used them within the
	// retention policy's unusedFor.
	// +optional
	RecentlyUsed int64 `json:"recentlyUsed,omitempty"`
	// NotNeeded images were kept by the disk-pressure policy (the image
	// filesystem was below its high threshold, or enough space was freed) or
	// by keepVersions (among the newest versions of their repository).
	// +optional
	NotNeeded int64 `json:"notNeeded,omitempty"`
	// CoolingDown images were kept from the automatic policies because they
	// came back after an earlier removal on their node and are within their
	// cool-down (manager.retention.coolDown, doubled at each return).
	// +optional
	CoolingDown int64 `json:"coolingDown,omitempty"`
	// GoneFromRegistry images were kept from the automatic policies because
	// a workload references them or a container used them lately, and their
	// registry no longer serves their content: removed, they could not be
	// pulled back (manager.retention.registryCheck).
	// +optional
	GoneFromRegistry int64 `json:"goneFromRegistry,omitempty"`
	// RegistryUnreachable images were kept as GoneFromRegistry ones, but
	// because their registry could not be asked (timeout, refused
	// credentials, the run's bound of requests); whenUnreachable: remove
	// removes them instead.
	// +optional
	RegistryUnreachable int64 `json:"registryUnreachable,omitempty"`
	// Referenced images were kept from the automatic policies because a pod
	// bound to the node or a workload template of the cluster references
	// them (manager.retention.protectReferenced).
	// +optional
	Referenced int64 `json:"referenced,omitempty"`
	// NotRepullable images were kept from the automatic policies because no
	// registry can give them back: imported or built on the node, not pulled
	// (manager.retention.protectNotRepullable).
	// +optional
	NotRepullable int64 `json:"notRepullable,omitempty"`
	// DryRun is true when nothing was actually removed.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Policies totals the removals by the policy that chose each image.
	// +optional
	// +listType=map
	// +listMapKey=policy
	// +kubebuilder:validation:MaxItems=8
	Policies []PolicyResult `json:"policies,omitempty"`
	// Regret is what came back to the nodes after earlier removals, as
	// their removal ledgers counted it: each return is told by the first
	// run on its node after a worker saw the image again.
	// +optional
	Regret *RegretResults `json:"regret,omitempty"`
}

// RegretResults totals the images that came back after Eraser removed
// them, across the job's nodes.
type RegretResults struct {
	// Returns counts the images that came back.
	// +optional
	Returns int64 `json:"returns,omitempty"`
	// BytesReturned is what their removals had freed, pulled back again.
	// +optional
	BytesReturned int64 `json:"bytesReturned,omitempty"`
	// Policies totals the returns by the policy that had removed them.
	// +optional
	// +listType=map
	// +listMapKey=policy
	// +kubebuilder:validation:MaxItems=8
	Policies []PolicyRegret `json:"policies,omitempty"`
	// Recent are the newest few returns across the nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	Recent []RegretReturn `json:"recent,omitempty"`
}

// PolicyRegret is what came back of one policy's removals.
type PolicyRegret struct {
	// Policy is the policy that had removed the images.
	Policy RemovalPolicy `json:"policy"`
	// Returns counts them.
	// +optional
	Returns int64 `json:"returns,omitempty"`
	// BytesReturned is what their removals had freed.
	// +optional
	BytesReturned int64 `json:"bytesReturned,omitempty"`
}

// RegretReturn is one image that came back to a node after a removal.
type RegretReturn struct {
	// Node is the node it came back to.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Image is its image ID.
	// +kubebuilder:validation:MaxLength=256
	Image string `json:"image"`
	// Repository is its repository when it was removed.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Repository string `json:"repository,omitempty"`
	// Bytes is what its removal had freed.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// Policy is the policy that had removed it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Policy string `json:"policy,omitempty"`
	// Run is the ImageJob that had removed it; empty for "eraser node
	// prune".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Run string `json:"run,omitempty"`
	// RemovedAt is when it was removed; ReturnedAt when it came back (the
	// runtime's pull time when it gives one, else when a worker saw it).
	RemovedAt  metav1.Time `json:"removedAt"`
	ReturnedAt metav1.Time `json:"returnedAt"`
}

// RemovalPolicy is why an image was chosen for removal.
// +kubebuilder:validation:Enum=Listed;Unused;Vulnerable;UnusedFor;Superseded;DiskPressure
type RemovalPolicy string

const (
	// PolicyListed: an ImageList named the image.
	PolicyListed RemovalPolicy = "Listed"
	// PolicyUnused: the image was unused and old enough, and the run removes
	// every such image (an ImageList "*", or a scheduled run with no scanner
	// and no other policy).
	PolicyUnused RemovalPolicy = "Unused"
	// PolicyVulnerable: the scanner found the image vulnerable.
	PolicyVulnerable RemovalPolicy = "Vulnerable"
	// PolicyUnusedFor: no container had used the image for unusedFor.
	PolicyUnusedFor RemovalPolicy = "UnusedFor"
	// PolicySuperseded: at least keepVersions newer versions of the image's
	// repository were on its node.
	PolicySuperseded RemovalPolicy = "Superseded"
	// PolicyDiskPressure: the image filesystem was above the high threshold
	// and the image was among those whose removal cost least (the bytes it
	// frees per the expected cost of pulling it back).
	PolicyDiskPressure RemovalPolicy = "DiskPressure"
)

// PolicyResult is what one policy removed across the job's nodes.
type PolicyResult struct {
	// Policy is the policy.
	Policy RemovalPolicy `json:"policy"`
	// Removed counts the images removed (would be, on a dry run).
	// +optional
	Removed int64 `json:"removed,omitempty"`
	// BytesFreed is their size as the runtime reported it.
	// +optional
	BytesFreed int64 `json:"bytesFreed,omitempty"`
}

// ImageJob is one run of node workers across the cluster. The manager creates
// it from an ImageList or a schedule; it has no spec.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ij,categories=eraser
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Started",type=integer,JSONPath=`.status.started`
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waiting`
// +kubebuilder:printcolumn:name="Behind",type=string,JSONPath=`.status.queuedBehind`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desired`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skipped`
// +kubebuilder:printcolumn:name="Trigger",type=string,JSONPath=`.metadata.labels.eraser\.sh/job-owner`
// +kubebuilder:printcolumn:name="ImageList",type=string,JSONPath=`.metadata.labels.eraser\.sh/imagelist`
// +kubebuilder:printcolumn:name="Removed",type=integer,JSONPath=`.status.results.removed`,priority=1
// +kubebuilder:printcolumn:name="Delete-After",type=string,JSONPath=`.status.deleteAfter`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImageJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ImageJobStatus `json:"status,omitempty"`
}

// ImageJobList is a list of ImageJobs.
//
// +kubebuilder:object:root=true
type ImageJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ImageJob{}, &ImageJobList{})
}
