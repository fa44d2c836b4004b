// Package reportshards reads a job's report, the ConfigMaps whose format
// nodereport defines, from the API server, for the manager and for
// kubectl-eraser alike.
package reportshards

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	eraserv1 "github.com/eraser-oss/eraser/api/v1"
	"github.com/eraser-oss/eraser/internal/util/kname"
	"github.com/eraser-oss/eraser/internal/wire/nodereport"
)

// Shards lists a job's shards, in order, from whichever reader is given
// (the API server: the manager's cache leaves shards out). Only shards
// owned by this job count: a shortened label value may be another job's,
// and an earlier job of the same name may have left shards behind.
func Shards(ctx context.Context, c client.Reader, namespace string, job *eraserv1.ImageJob) ([]corev1.ConfigMap, error) {
	var list corev1.ConfigMapList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{nodereport.LabelReport: kname.LabelValue(job.Name)}); err != nil {
		return nil, fmt.Errorf("listing the report of job %s: %w", job.Name, err)
	}
	out := list.Items[:0]
	for _, cm := range list.Items {
		if nodereport.Ours(&cm, job) {
			out = append(out, cm)
		}
	}
	slices.SortFunc(out, func(a, b corev1.ConfigMap) int { return nodereport.ShardIndex(a.Name) - nodereport.ShardIndex(b.Name) })
	return out, nil
}
