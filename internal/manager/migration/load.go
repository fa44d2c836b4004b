package migration

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/manager/pause"
	"github.com/eraser-oss/eraser/internal/wire/config"
)

// CRDNames are the eraser.sh CRDs.
var CRDNames = []string{"imagelists.eraser.sh", "imagejobs.eraser.sh"}

// Load lists what the checks read. With rollback, it counts the ImageJobs
// and report ConfigMaps too. CRDs not installed, and kinds the API does
// not serve, are read as none.
func Load(ctx context.Context, c client.Reader, namespace string, rollback bool) (Cluster, error) {
	out := Cluster{Namespace: namespace}
	var deployments appsv1.DeploymentList
	if err := c.List(ctx, &deployments); err != nil {
		return out, fmt.Errorf("listing Deployments in every namespace: %w", err)
	}
	for i := range deployments.Items {
		if IsManager(&deployments.Items[i]) {
			out.Deployments = append(out.Deployments, deployments.Items[i])
		}
	}
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(namespace), client.MatchingLabels{LabelExclusionList: "true"}); err != nil {
		return out, fmt.Errorf("listing exclusion lists in %s: %w", namespace, err)
	}
	out.ConfigMaps = cms.Items
	for _, name := range []string{config.ConfigMapName, pause.Name} {
		cm := corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cm)
		switch {
		case err == nil:
			out.ConfigMaps = append(out.ConfigMaps, cm)
		case !apierrors.IsNotFound(err):
			return out, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
		}
	}
	for _, name := range CRDNames {
		crd := apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKey{Name: name}, &crd)
		switch {
		case err == nil:
			out.CRDs = append(out.CRDs, crd)
		case !apierrors.IsNotFound(err):
			return out, fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
	}
	var lists eraserv1.ImageListList
	if err := c.List(ctx, &lists); err != nil && !notServed(err) {
		return out, fmt.Errorf("listing ImageLists: %w", err)
	}
	out.ImageLists = lists.Items
	if !rollback {
		return out, nil
	}
	var jobs eraserv1.ImageJobList
	if err := c.List(ctx, &jobs); err != nil && !notServed(err) {
		return out, fmt.Errorf("listing ImageJobs: %w", err)
	}
	out.ImageJobs = len(jobs.Items)
	// Metadata only: one job's report can hold megabytes.
	reports := metav1.PartialObjectMetadataList{}
	reports.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, &reports, client.InNamespace(namespace), client.HasLabels{eraserv1.LabelReport}); err != nil {
		return out, fmt.Errorf("listing reports in %s: %w", namespace, err)
	}
	out.Reports = len(reports.Items)
	return out, nil
}

func notServed(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}
