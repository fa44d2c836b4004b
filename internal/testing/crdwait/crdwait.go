// Package crdwait waits for CustomResourceDefinitions to be established,
// for the tests that install Eraser's chart or manifest: the API server
// serves a CRD's resources only from then on.
package crdwait

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/eraser-oss/eraser/internal/testing/wait"
)

// Established waits until every named CRD is established, failing the
// test after timeout.
func Established(t testing.TB, c client.Client, timeout time.Duration, names ...string) {
	t.Helper()
	for _, name := range names {
		wait.For(t, timeout, "CRD "+name+" to be established", func() bool {
			var crd apiextensionsv1.CustomResourceDefinition
			return c.Get(context.Background(), client.ObjectKey{Name: name}, &crd) == nil && established(&crd)
		})
	}
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
