// Package v1 holds the stored version of the eraser.sh API: ImageList, the
// images a user wants removed from every node now, and ImageJob, one run of
// node workers across the cluster.
//
// The API server also serves these kinds as eraser.sh/v1alpha1 (deprecated)
// with the same schema; that version is generated from these types, see
// hack/crdversions.
//
// +kubebuilder:object:generate=true
// +groupName=eraser.sh
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the stored API.
	GroupVersion = schema.GroupVersion{Group: "eraser.sh", Version: "v1"}

	// SchemeBuilder registers the API types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
