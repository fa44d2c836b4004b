package crdcheck

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
)

// The manager reads the two CRDs by name, and nothing else of the group.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=imagelists.eraser.sh;imagejobs.eraser.sh,verbs=get

// Need is a CRD the manager writes, at the version it writes, and the
// field paths it writes and reads there.
type Need struct {
	Name, Version string
	Fields        [][]string
}

// Needs are the manager's: every field of the Go types of eraser.sh/v1, so
// a field added to the API is checked without a list to keep up to date.
func Needs() []Need {
	return []Need{
		{Name: "imagelists.eraser.sh", Version: eraserv1.GroupVersion.Version, Fields: Fields(reflect.TypeFor[eraserv1.ImageList]())},
		{Name: "imagejobs.eraser.sh", Version: eraserv1.GroupVersion.Version, Fields: Fields(reflect.TypeFor[eraserv1.ImageJob]())},
	}
}

// Finding is a CRD that would not keep what the manager writes.
type Finding struct {
	Name, Version string
	// Object is the CRD as read, nil when it is not installed.
	Object *apiextensionsv1.CustomResourceDefinition
	// Problem says why the version serves nothing, when it does not.
	Problem string
	// Missing are the field paths the served schema would prune.
	Missing []string
}

func (f Finding) String() string {
	if f.Problem != "" {
		return fmt.Sprintf("CRD %s %s", f.Name, f.Problem)
	}
	return fmt.Sprintf("CRD %s (%s) lacks %s", f.Name, f.Version, strings.Join(f.Missing, ", "))
}

// Lacks compares one installed CRD (nil when there is none) with what the
// manager needs of it.
func Lacks(crd *apiextensionsv1.CustomResourceDefinition, need Need) (Finding, bool) {
	f := Finding{Name: need.Name, Version: need.Version, Object: crd}
	if crd == nil {
		f.Problem = "is not installed"
		return f, true
	}
	schema, err := ServedSchema(crd, need.Version)
	if err != nil {
		f.Problem = err.Error()
		return f, true
	}
	f.Missing = Missing(schema, need.Fields)
	return f, len(f.Missing) > 0
}

// Check reads each CRD the manager needs and returns those that would not
// keep its fields. An error is one from reading them, wrapped with the CRD's
// name.
func Check(ctx context.Context, r client.Reader, needs []Need) ([]Finding, error) {
	var out []Finding
	for _, need := range needs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := r.Get(ctx, client.ObjectKey{Name: need.Name}, crd)
		switch {
		case apierrors.IsNotFound(err):
			crd = nil
		case err != nil:
			return nil, fmt.Errorf("reading CRD %s: %w", need.Name, err)
		}
		if f, lacking := Lacks(crd, need); lacking {
			out = append(out, f)
		}
	}
	return out, nil
}

// Remedy is what to run to install this release's CRDs, as the log line,
// the Event and the readiness check say it; namespace is the manager's.
func Remedy(namespace string) string {
	return "install this release's CRDs: with Helm, " +
		"`helm upgrade <release> <chart> --namespace " + namespace + " --reuse-values --set crds.adopt=true --take-ownership --force-conflicts`; " +
		"with the static manifest, or when something else manages the CRDs (crds.install=false), " +
		"`kubectl apply --server-side --force-conflicts -f <the release's CRDs>` (docs/troubleshooting.md)"
}

// Message is the one sentence the manager says about the findings.
func Message(findings []Finding, namespace string) string {
	parts := make([]string, len(findings))
	for i, f := range findings {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ") +
		": the API server drops the fields a CRD does not declare, so the manager runs nothing until you " + Remedy(namespace)
}
