package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PruneAll, as an ImageList entry, selects every image that no container uses
// and no exclusion protects.
const PruneAll = "*"

// ImageListSpec lists the images to remove from every eligible node.
type ImageListSpec struct {
	// Images are the images to remove: references as users write them
	// ("alpine", "alpine:3.19", "docker.io/library/alpine:3.19",
	// "repo@sha256:..."), bare "sha256:..." digests or image IDs, or "*" for
	// every image that no container uses. Images in use, pinned by the runtime
	// or protected by an exclusion list are never removed.
	//
	// The limits keep one ImageList far below the 1.5 MiB etcd object limit
	// while leaving room for tens of thousands of entries.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^[^\s]+$`
	// +listType=atomic
	Images []string `json:"images"`

	// DryRun runs the job with the removers reporting what they would remove
	// and how many bytes that would free, without removing anything.
	// An addition to upstream Eraser; upstream clients never set it.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// ImageListStatus reports the last run of this ImageList.
type ImageListStatus struct {
	// Timestamp is when the last run finished.
	// +optional
	Timestamp *metav1.Time `json:"timestamp,omitempty"`

	// Success is the number of nodes on which the last run succeeded.
	// +optional
	Success int64 `json:"success"`

	// Failed is the number of nodes on which the last run failed.
	// +optional
	Failed int64 `json:"failed"`

	// Skipped is the number of nodes the last run left out (node filter).
	// +optional
	Skipped int64 `json:"skipped"`

	// ObservedGeneration is the generation of the spec the last run applied.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions describe the ImageList's current state; see the
	// ImageList condition types in this package.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Results totals the per-image outcomes of the last run.
	// +optional
	Results *ImageResults `json:"results,omitempty"`

	// Job is the ImageJob of the last run; its status.report points to the
	// per-node report while the job is kept.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Job string `json:"job,omitempty"`

	// StartedGeneration is the generation of the spec whose run was started
	// last. A run whose ImageJob is deleted before it finishes is not
	// started again for that generation: deleting a job stops its run
	// (Ready's reason is then RunDeleted); an edit of the spec or an
	// eraser.sh/run-now request starts the next.
	// +optional
	StartedGeneration int64 `json:"startedGeneration,omitempty"`

	// QueuedBehind is the run (an ImageJob's name) that this list's run
	// waits for on some nodes (Ready's reason is then Queued).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	QueuedBehind string `json:"queuedBehind,omitempty"`
}

// ImageList is the set of images to remove from the cluster's nodes now.
// Creating or editing one starts an ImageJob.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=il,categories=eraser
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Behind",type=string,JSONPath=`.status.queuedBehind`
// +kubebuilder:printcolumn:name="Success",type=integer,JSONPath=`.status.success`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skipped`
// +kubebuilder:printcolumn:name="Removed",type=integer,JSONPath=`.status.results.removed`
// +kubebuilder:printcolumn:name="Freed",type=string,JSONPath=`.status.results.freed`,priority=1
// +kubebuilder:printcolumn:name="Dry-Run",type=boolean,JSONPath=`.spec.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Last-Run",type=date,JSONPath=`.status.timestamp`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImageList struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   ImageListSpec   `json:"spec"`
	Status ImageListStatus `json:"status,omitempty"`
}

// ImageListList is a list of ImageLists.
//
// +kubebuilder:object:root=true
type ImageListList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageList `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ImageList{}, &ImageListList{})
}
