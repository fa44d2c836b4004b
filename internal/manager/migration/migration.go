// Package migration compares a cluster as it is with what this Eraser
// will do in it: before moving from upstream Eraser (kubectl eraser migrate
// check), after the upgrade (the chart's helm test), and before moving
// back (kubectl eraser migrate rollback). The checks are pure functions
// over objects listed once (Cluster); Load lists them.
package migration

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// Cluster is what the checks read.
type Cluster struct {
	// Namespace is where this Eraser runs, or is to be installed.
	Namespace string
	// Deployments are every namespace's Deployments that look like an
	// Eraser manager (Load filters them; the checks classify them).
	Deployments []appsv1.Deployment
	// ConfigMaps are Namespace's EraserConfig and exclusion lists.
	ConfigMaps []corev1.ConfigMap
	ImageLists []eraserv1.ImageList
	// CRDs are the eraser.sh CustomResourceDefinitions.
	CRDs []apiextensionsv1.CustomResourceDefinition
	// ImageJobs and Reports count the jobs and their report ConfigMaps
	// (read for a rollback only).
	ImageJobs, Reports int
}

// Severity orders findings.
type Severity int

const (
	// Difference: something will run differently after the move.
	Difference Severity = iota + 1
	// Blocking: resolve it before moving, or the move does harm (two
	// managers, a list every node fails on, a configuration refused).
	Blocking
)

func (s Severity) String() string {
	if s == Blocking {
		return "BLOCKING"
	}
	return "difference"
}

// Finding is one difference.
type Finding struct {
	Severity Severity
	// Area is what it concerns: manager, configuration, exclusions,
	// imagelist, rollback.
	Area string
	// Object names the object, as kubectl does (kind/name or
	// kind/namespace/name).
	Object string
	// What is the difference and what to do.
	What string
}

// Sort orders findings: blocking first, then by area and object.
func Sort(fs []Finding) {
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if a.Severity != b.Severity {
			return int(b.Severity) - int(a.Severity)
		}
		if c := strings.Compare(a.Area, b.Area); c != 0 {
			return c
		}
		return strings.Compare(a.Object, b.Object)
	})
}

// Worst is the highest severity found, 0 for none.
func Worst(fs []Finding) Severity {
	var w Severity
	for _, f := range fs {
		w = max(w, f.Severity)
	}
	return w
}

// Write prints the findings as a table, or says there are none.
func Write(w io.Writer, fs []Finding) error {
	if len(fs) == 0 {
		_, err := fmt.Fprintln(w, "no differences found")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEVERITY\tAREA\tOBJECT\tDIFFERENCE")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Severity, f.Area, f.Object, f.What)
	}
	return tw.Flush()
}
